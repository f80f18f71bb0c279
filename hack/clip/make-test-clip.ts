// npm run make-test-clip -- <dir>: write Strata's small CLIP-shaped test model into <dir>.
import path from 'node:path';
import { writeTestClipModel } from './test-clip-model.js';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: npm run make-test-clip -- <dir>');
  process.exit(2);
}
writeTestClipModel(path.resolve(dir));
console.log(`wrote the Strata test CLIP model to ${path.resolve(dir)}`);
