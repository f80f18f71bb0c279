import path from 'node:path';
import { expect } from 'chai';
import { imageContents } from '../../hack/images/graph.js';
import { IMAGES, imageSpec } from '../../hack/images/images.js';
import { imageSize, LIMIT_BYTES, ONNX_LIMIT_BYTES } from '../../hack/images/size-report.js';

const root = path.resolve(import.meta.dirname, '../..');

describe('container images: what they carry and their size (hack/images/size-report.ts)', function () {
  this.timeout(300_000);

  for (const spec of IMAGES) {
    it(`images/${spec.name} stays within its size limit`, () => {
      const size = imageSize(spec, root);
      expect(size.limitBytes).to.equal(size.onnxRuntime ? ONNX_LIMIT_BYTES : LIMIT_BYTES);
      expect(size.totalBytes, `${spec.name}: ${(size.totalBytes / 1e6).toFixed(1)} MB`).to.be.at.most(size.limitBytes);
    });
  }

  it('carries ONNX Runtime only where the code runs models, and only its Linux binaries for this machine', () => {
    for (const spec of IMAGES) {
      const { packageDirs, files } = imageContents(spec, root);
      const onnx = packageDirs.includes('node_modules/onnxruntime-node');
      expect(onnx, spec.name).to.equal(['model-server', 'image-search', 'standalone'].includes(spec.name));
      const binaries = files.map((f) => f.source).filter((s) => s.includes('onnxruntime-node/bin/'));
      for (const b of binaries) expect(b, spec.name).to.contain(`/${process.platform}/${process.arch}/`);
    }
  });

  it('carries only the packages its modules import, with their dependencies', () => {
    const gateway = imageContents(imageSpec('gateway'), root).packageDirs;
    expect(gateway).to.include.members(['node_modules/express', 'node_modules/ioredis']);
    for (const absent of [
      'node_modules/onnxruntime-node',
      'node_modules/sharp',
      'node_modules/better-sqlite3',
      'node_modules/tsx',
      'node_modules/typescript',
      'node_modules/@kubernetes/client-node',
    ]) {
      expect(gateway).to.not.include(absent);
    }
  });
});
