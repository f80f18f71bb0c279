import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { renderImageIndex } from '../../controllers/image-index/render-image-index.js';
import { imageIndexSpec, type ImageIndex } from '../../controllers/api/index.js';
import { TEST_SETTINGS, type Doc } from '../controllers/support/harness.js';

const readme = readFileSync(path.resolve(import.meta.dirname, '../../charts/strata/README.md'), 'utf8');

/** The chart's README says what the operator renders for GPU ImageIndex workers. */
describe('charts README on GPU images', () => {
  it('names the -cuda image-search variant the operator renders for a GPU ImageIndex', () => {
    const ix = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name: 'p', namespace: 'n' }, spec: { source: { bucket: 'photos' }, model: { directory: '/models/clip' }, gpu: { enabled: true } } };
    const [, deployment] = renderImageIndex(ix as unknown as ImageIndex, imageIndexSpec.parse(ix.spec), TEST_SETTINGS) as Doc[];
    expect(deployment!.spec.template.spec.containers[0].image).to.match(/image-search:.*-cuda$/);
    const row = readme.split('\n').find((l) => l.startsWith('| `ImageIndex`'))!;
    expect(row).to.not.match(/no CUDA build/);
    expect(row).to.contain('`-cuda` variant of the image-search image');
  });
});
