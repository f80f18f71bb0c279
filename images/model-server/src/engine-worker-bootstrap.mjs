// Entry of the generation worker thread. Where the services run their TypeScript through tsx, its
// `--import tsx` hooks do not reach a worker's entry module: tsx's CommonJS hook compiles the worker
// module (workerData.entry, a .ts file) and its imports in this thread; the ESM hooks would start
// one more loader thread (about 25 MB of resident memory) for a module graph loaded once. In the
// container images the worker module is compiled JavaScript and is imported as it is (no tsx there).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/cjs/api');
  register();
  createRequire(import.meta.url)(fileURLToPath(workerData.entry));
} else {
  await import(workerData.entry);
}
