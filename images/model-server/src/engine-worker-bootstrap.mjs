// Entry of the generation worker thread. The services run their TypeScript through tsx, whose
// `--import tsx` hooks do not reach a worker's entry module. tsx's CommonJS hook compiles the worker
// module (workerData.entry, a .ts file) and its imports in this thread; the ESM hooks would start
// one more loader thread (about 25 MB of resident memory) for a module graph loaded once.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/cjs/api';

register();
createRequire(import.meta.url)(fileURLToPath(workerData.entry));
