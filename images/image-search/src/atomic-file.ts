// Crash-safe file replacement: write a temp file, fsync it, rename over the target, fsync the directory.
// A failed write removes its temp file (a crash may leave one: the index directory's sweep knows the name).
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipelineClosed } from '../../service-kit/src/index.js';

const tempNameOf = (file: string) => `${file}.tmp-${process.pid}-${Date.now()}`;

/** `sync: false` skips the fsyncs (the replacement is still all or nothing), for state a later pass repairs. */
export async function writeFileAtomic(file: string, data: string | Uint8Array, { sync = true } = {}): Promise<void> {
  const tmp = tempNameOf(file);
  try {
    const handle = await fs.open(tmp, 'w');
    try {
      await handle.writeFile(data);
      if (sync) await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fs.rename(tmp, file);
  if (sync) await syncDir(path.dirname(file));
}

/**
 * `source` streamed into `file` the same way: nothing at `file` until every byte is there, no temp file left
 * on failure. `sync: false` skips the fsyncs, for copies that a later check repairs after a crash.
 */
export async function streamToFileAtomic(source: Readable, file: string, { sync = true } = {}): Promise<void> {
  const tmp = tempNameOf(file);
  try {
    await pipelineClosed(source, createWriteStream(tmp, { flags: 'wx', flush: sync }));
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fs.rename(tmp, file);
  if (sync) await syncDir(path.dirname(file));
}

export async function syncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
