import { expect } from 'chai';
import {
  INDEX_WORKER_DEFAULT_RESOURCES,
  MODEL_SERVER_DEFAULT_RESOURCES,
  imageIndexSpec,
  modelServerSpec,
  type ImageIndex,
  type ModelServer,
} from '../../controllers/api/index.js';
import { renderImageIndex } from '../../controllers/image-index/render-image-index.js';
import { renderModelServer } from '../../controllers/model-server/render-model-server.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { TEST_SETTINGS, type Doc } from './support/harness.js';

type Resources = { requests?: Record<string, string | number>; limits?: Record<string, string | number> };

const meta = { namespace: 'ns', uid: 'u' };
const renderers: Record<string, (spec: object) => Manifest[]> = {
  'index worker': (spec) =>
    renderImageIndex(
      { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name: 'ix', ...meta }, spec } as unknown as ImageIndex,
      imageIndexSpec.parse(spec),
      TEST_SETTINGS,
    ),
  'model server': (spec) =>
    renderModelServer(
      { apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name: 'm', ...meta }, spec } as unknown as ModelServer,
      modelServerSpec.parse(spec),
      TEST_SETTINGS,
    ),
};
const baseSpec: Record<string, object> = { 'index worker': { source: { bucket: 'photos' }, model: { bucket: 'models' } }, 'model server': {} };
const defaults: Record<string, Resources> = { 'index worker': INDEX_WORKER_DEFAULT_RESOURCES, 'model server': MODEL_SERVER_DEFAULT_RESOURCES };

function containerResources(objects: Manifest[]): Resources[] {
  const deployment = objects.find((o) => o.kind === 'Deployment') as Doc;
  return (deployment.spec.template.spec.containers as Array<{ resources?: Resources }>).map((c) => c.resources ?? {});
}

describe('index workers and model servers: requests and limits', () => {
  for (const what of Object.keys(renderers)) {
    it(`a ${what} without spec.resources gets default requests and a memory limit (never BestEffort)`, () => {
      for (const r of containerResources(renderers[what]!(baseSpec[what]!))) {
        expect(r).to.deep.equal(defaults[what]);
        expect(r.requests).to.include.keys('cpu', 'memory');
        expect(r.limits).to.include.keys('memory');
      }
    });

    it(`a ${what} with spec.resources gets exactly those, and a GPU limit beside the defaults when it asks for one`, () => {
      const given = { requests: { cpu: '2', memory: '8Gi' } };
      expect(containerResources(renderers[what]!({ ...baseSpec[what], resources: given }))).to.deep.equal([given]);
      const [gpu] = containerResources(renderers[what]!({ ...baseSpec[what], gpu: { enabled: true } }));
      expect(gpu).to.deep.equal({ ...defaults[what], limits: { ...defaults[what]!.limits, 'nvidia.com/gpu': 1 } });
    });
  }
});
