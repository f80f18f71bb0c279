import { existsSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { aptInstalls, imageStage } from '../../hack/images/dockerfile.js';
import { imageContents } from '../../hack/images/graph.js';
import { FAISS_BINDING, IMAGES } from '../../hack/images/images.js';
import { linkedLibraries, requiredPackages } from '../../hack/images/libraries.js';

const root = path.resolve(import.meta.dirname, '../..');

// ldd on the native addons and shared objects each image carries, as built and installed here (the
// images' Debian release is this machine's): every library they link must be carried by the image or
// come from a package that the base image holds or the runtime stages install (the image's own and the
// shared one under it, hack/images/Dockerfile); and they install exactly those packages (no -dev
// packages, nothing unused).
describe('container images: the shared libraries their native addons link (ldd)', function () {
  this.timeout(300_000);
  before(function () {
    if (!existsSync(path.join(root, FAISS_BINDING))) this.skip(); // npm run build:native (pretest) builds it
  });

  for (const spec of IMAGES) {
    it(`images/${spec.name}: the runtime stage installs exactly the packages of the libraries its addons link`, () => {
      const { files } = imageContents(spec, root);
      const linked = linkedLibraries(files, root);
      expect(linked.missing, `${spec.name}: libraries ldd cannot resolve`).to.deep.equal([]);
      // The image's runtime stage with the shared runtime stage under it.
      const installs = aptInstalls(imageStage(spec.name, { root })).sort();
      expect(installs, `${spec.name}: ${[...linked.packages].map(([p, libs]) => `${p} (${libs.join(', ')})`).join('; ')}`).to.deep.equal(
        requiredPackages(linked),
      );
    });
  }

  it('finds the FAISS binding and what it links where images search', () => {
    for (const name of ['image-search', 'standalone']) {
      const linked = linkedLibraries(imageContents(IMAGES.find((i) => i.name === name)!, root).files, root);
      expect(linked.binaries, name).to.include(FAISS_BINDING);
      expect([...linked.packages.keys()], name).to.include.members(['libgomp1', 'libopenblas0-pthread']);
    }
  });
});
