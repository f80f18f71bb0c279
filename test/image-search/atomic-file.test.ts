import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { streamToFileAtomic } from '../../images/image-search/src/atomic-file.js';
import { freshDirPerTest } from '../support/temp-dir.js';

describe('image-search: files written whole or not at all (streamToFileAtomic)', () => {
  const tmp = freshDirPerTest('strata-atomic-file-');

  it('writes the whole stream to the file, replacing what was there', async () => {
    const file = path.join(tmp.path, 'model.onnx');
    await writeFile(file, 'old');
    await streamToFileAtomic(Readable.from([Buffer.from('new '), Buffer.from('bytes')]), file);
    expect(await readFile(file, 'utf8')).to.equal('new bytes');
    // Without the fsyncs (a mirror's copies): the same file, whole.
    await streamToFileAtomic(Readable.from([Buffer.from('mirrored')]), path.join(tmp.path, 'img.jpg'), { sync: false });
    expect(await readFile(path.join(tmp.path, 'img.jpg'), 'utf8')).to.equal('mirrored');
    expect((await readdir(tmp.path)).sort()).to.deep.equal(['img.jpg', 'model.onnx']);
  });

  it('a download cut off midway leaves neither the file nor a temp file, and an older file untouched', async () => {
    for (const existing of [undefined, 'old']) {
      const file = path.join(tmp.path, `img-${existing ?? 'none'}.jpg`);
      if (existing) await writeFile(file, existing);
      async function* cutOff() {
        yield Buffer.from('first part');
        throw new Error('connection reset');
      }
      const failure = await streamToFileAtomic(Readable.from(cutOff()), file).then(
        () => undefined,
        (err: Error) => err.message,
      );
      expect(failure).to.equal('connection reset');
      expect(existing ? await readFile(file, 'utf8') : existsSync(file)).to.equal(existing ?? false);
    }
    // Settled: no temp file appears later either.
    await new Promise((r) => setTimeout(r, 50));
    expect(await readdir(tmp.path)).to.deep.equal(['img-old.jpg']);
  });
});
