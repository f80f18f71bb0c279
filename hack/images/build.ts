// Writes one image's /app into a folder: its modules compiled to JavaScript under dist/, the files they
// read, and only the installed packages they import (less what nothing loads at run time). The image's
// Dockerfile runs it in its build stage (on the shared build stage of hack/images/Dockerfile, which holds the
// dependencies and the sources) and copies the folder into its runtime stage.
//   npx tsx hack/images/build.ts <image> <out-dir>
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { compilerOptions, imageContents, REPO_ROOT, transpile } from './graph.js';
import { compiledPath, imageSpec } from './images.js';

export function buildImageApp(image: string, out: string, root = REPO_ROOT): void {
  const spec = imageSpec(image);
  const { files, graph } = imageContents(spec, root);
  const options = compilerOptions(root);
  rmSync(out, { recursive: true, force: true });
  for (const file of files) {
    const target = path.join(out, file.target);
    mkdirSync(path.dirname(target), { recursive: true });
    if (file.compile) writeFileSync(target, transpile(path.join(root, file.source), options));
    else copyFileSync(path.join(root, file.source), target);
  }
  // The compiled modules are ES modules, as in the repository.
  writeFileSync(
    path.join(out, 'package.json'),
    `${JSON.stringify({ name: `strata-${image}`, private: true, type: 'module', main: compiledPath(spec.entry) }, null, 2)}\n`,
  );
  if (graph.leftOut.length) console.log(`${image}: development-only modules left out: ${graph.leftOut.join(', ')}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [image, out] = process.argv.slice(2);
  if (!image || !out) {
    console.error('usage: tsx hack/images/build.ts <image> <out-dir>');
    process.exit(2);
  }
  buildImageApp(image, path.resolve(out));
}
