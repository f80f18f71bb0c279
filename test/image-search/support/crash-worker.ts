// Child process for the crash test: opens an index, runs one operation and SIGKILLs itself at a
// chosen point of its durable-write sequence (a real crash: no cleanup, no close).
//
//   node --import tsx crash-worker.ts <dir> <op: rebuild|merge|add> <point>
//   points: main-rename     the new main index is written to its temp file, not renamed yet
//           manifest-rename  the new main (or the appended vectors) are durable, the manifest is not
//           old-main-rm      the manifest is committed, the previous main index file not yet removed
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ImageIndex } from '../../../images/image-search/src/index/image-index.js';
import { clusteredVectors } from './clustered-vectors.js';
import { CRASH_DIM, crashIndexOptions } from './crash-index.js';

const [dir, op, point] = process.argv.slice(2);
const d = CRASH_DIM;
const die = (): never => {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
};

const rename = fs.rename.bind(fs);
fs.rename = async (from, to) => {
  const target = path.basename(String(to));
  if (point === 'main-rename' && /^main-\d+\.faiss$/.test(target)) die();
  if (point === 'manifest-rename' && target === 'manifest.json') die();
  await rename(from, to);
};
const rm = fs.rm.bind(fs);
fs.rm = async (file, options) => {
  if (point === 'old-main-rm' && /main-\d+\.faiss$/.test(String(file))) die();
  await rm(file, options);
};

const index = await ImageIndex.open(crashIndexOptions(dir!));
if (op === 'add') {
  const x = clusteredVectors(5, d, 5, 99);
  await index.add(x, ['crash/0.jpg', 'crash/1.jpg', 'crash/2.jpg', 'crash/3.jpg', 'crash/4.jpg']);
} else {
  if (op === 'merge') index.merge();
  else index.rebuild();
  const job = await index.waitForJob();
  console.error(`job finished without reaching ${point}: ${JSON.stringify(job)}`);
}
process.exit(3);
