import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, Readable, Transform, Writable } from 'node:stream';
import { expect } from 'chai';
import { pipelineClosed } from '../../images/service-kit/src/streams.js';
import { freshDirPerTest } from '../support/temp-dir.js';

/** A file sink whose file is created some time after it is made (as an fs stream's open waits on a busy thread pool). */
class SlowOpeningSink extends Writable {
  readonly chunks: Buffer[] = [];
  constructor(
    private readonly file: string,
    private readonly openDelayMs: number,
  ) {
    super();
  }

  override _construct(callback: (error?: Error | null) => void): void {
    setTimeout(() => writeFile(this.file, '', { flag: 'wx' }).then(() => callback(), callback), this.openDelayMs);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.chunks.push(chunk);
    callback();
  }
}

describe('service kit: pipelineClosed', () => {
  const tmp = freshDirPerTest('strata-streams-');

  it('passes every byte through and resolves when the last stream has finished', async () => {
    const sink = new SlowOpeningSink(path.join(tmp.path, 'ok'), 20);
    await pipelineClosed(Readable.from([Buffer.from('ab'), Buffer.from('cd')]), new PassThrough(), sink);
    expect(Buffer.concat(sink.chunks).toString()).to.equal('abcd');
    expect(existsSync(path.join(tmp.path, 'ok'))).to.equal(true);
  });

  it('rejects a failure only once a sink still opening its file has created and closed it, so removing it then is final', async () => {
    for (const failAt of ['source', 'middle'] as const) {
      const file = path.join(tmp.path, `${failAt}.tmp`);
      async function* body() {
        yield Buffer.from('longer than allowed');
        if (failAt === 'source') throw new Error('client went away');
      }
      const limit = new Transform({
        transform(chunk: Buffer, _enc, done) {
          if (failAt === 'middle') done(new Error('body longer than its Content-Length'));
          else done(null, chunk);
        },
      });
      const sink = new SlowOpeningSink(file, 50);
      const failure = await pipelineClosed(Readable.from(body()), limit, sink).then(
        () => undefined,
        (err: Error) => err.message,
      );
      expect(failure, failAt).to.equal(failAt === 'source' ? 'client went away' : 'body longer than its Content-Length');
      expect(sink.closed, `${failAt}: sink closed when the failure is reported`).to.equal(true);
      // What a caller does on failure: remove the temp file. Nothing recreates it afterwards.
      await rm(file, { force: true });
      await new Promise((r) => setTimeout(r, 80));
      expect(existsSync(file), `${failAt}: file gone for good`).to.equal(false);
    }
  });
});
