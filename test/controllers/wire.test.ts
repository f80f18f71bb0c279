import { expect } from 'chai';
import { imageIndexSpec, modelServerSpec, type ImageIndex, type ModelServer } from '../../controllers/api/index.js';
import { renderFlowRulesConfigMap, renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets } from '../../controllers/bucket/stack-secrets.js';
import { renderImageIndex, renderIndexJob } from '../../controllers/image-index/render-image-index.js';
import { renderModelServer } from '../../controllers/model-server/render-model-server.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { harnessHooks, stored, TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';

/** Paths where `sent` has a value that `got` lacks or holds differently. */
function lost(sent: unknown, got: unknown, at = ''): string[] {
  if (sent && typeof sent === 'object' && !Array.isArray(sent)) {
    if (!got || typeof got !== 'object') return [at];
    return Object.entries(sent as Doc).flatMap(([k, v]) => (v === undefined ? [] : lost(v, (got as Doc)[k], `${at}.${k}`)));
  }
  if (Array.isArray(sent)) {
    if (!Array.isArray(got) || got.length !== sent.length) return [at];
    return sent.flatMap((v, i) => lost(v, got[i], `${at}[${i}]`));
  }
  return sent === got ? [] : [`${at} (${JSON.stringify(sent)} → ${JSON.stringify(got)})`];
}

/**
 * client-node serializes built-in kinds through its typed models, which drop fields they do not
 * know: every field a renderer sets must reach the API server as rendered (a misspelt field would
 * otherwise vanish silently).
 */
describe('rendered objects on the wire (client-node serialization)', () => {
  const h = harnessHooks('suite');

  it('reach the API server field for field, applied server-side', async () => {
    const owners = [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'b', uid: 'uid-b' }];
    const settings = { ...TEST_SETTINGS, postgresReplicaUrls: ['postgres://r/strata'] };
    const ix = (name: string, spec: object) =>
      ({ apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name, namespace: 'wire', uid: `u-${name}` }, spec }) as unknown as ImageIndex;
    const gpuIx = ix('gpu', {
      source: { directory: '/images', volumeClaimName: 'images' },
      model: { directory: '/models', volumeClaimName: 'models' },
      gpu: { enabled: true, count: 2, tolerations: [{ key: 'k', operator: 'Equal', value: 'v', effect: 'NoExecute', tolerationSeconds: 30 }] },
      resources: { requests: { cpu: 2, memory: '8Gi' }, limits: { memory: '16Gi' } },
      storage: { size: '50Gi', storageClassName: 'fast' },
    });
    const bucketIx = ix('bucket', { source: { bucket: 'photos', prefix: 'p/' }, model: { bucket: 'models' } });
    const ms = { apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name: 'm', namespace: 'wire', uid: 'u-m' } } as unknown as ModelServer;
    const msSpec = {
      replicas: 3,
      port: 8100,
      gpu: { enabled: true },
      resources: { limits: { cpu: '1500m', memory: '1Gi' } },
      model: { name: 'tiny', path: '/m' },
    };
    const objects: Manifest[] = [
      ...renderStorageStack('wire', owners, settings, TEST_CREDENTIALS),
      ...renderStackSecrets('wire'),
      renderFlowRulesConfigMap('wire'),
      ...renderImageIndex(gpuIx, imageIndexSpec.parse(gpuIx.spec), TEST_SETTINGS),
      ...renderImageIndex(bucketIx, imageIndexSpec.parse(bucketIx.spec), TEST_SETTINGS),
      renderIndexJob(gpuIx, 'rebuild', 'gpu-rebuild-1', TEST_SETTINGS),
      ...renderModelServer({ ...ms, spec: msSpec } as never, modelServerSpec.parse(msSpec), TEST_SETTINGS),
    ];
    const problems: string[] = [];
    for (const obj of objects) {
      await h.kube.apply(obj);
      const got = stored(h.fake, obj.apiVersion, obj.kind, 'wire', obj.metadata.name);
      problems.push(...lost(obj, got).map((p) => `${obj.kind}/${obj.metadata.name}${p}`));
    }
    expect(problems).to.deep.equal([]);
    expect(objects.length).to.be.greaterThan(25);
    // protocol is part of the key of Service and container ports in server-side apply: always set it.
    const portsWithoutProtocol = objects.flatMap((o) =>
      [...JSON.stringify(o).matchAll(/\{[^{}]*"(?:containerPort|port)":\d+[^{}]*\}/g)]
        .map((m) => m[0])
        .filter((p) => !p.includes('"protocol"') && !p.includes('"path"'))
        .map((p) => `${o.kind}/${o.metadata.name} ${p}`),
    );
    expect(portsWithoutProtocol).to.deep.equal([]);
    // Keyed lists must not repeat a key (server-side apply refuses duplicates): env and volumes by name, mounts by path.
    const duplicates: string[] = [];
    const podSpecs = objects
      .map((o) => [o, (o as Doc).spec?.template?.spec ?? (o as Doc).spec?.jobTemplate?.spec?.template?.spec] as const)
      .filter(([, p]) => p);
    for (const [o, pod] of podSpecs) {
      const check = (what: string, keys: string[]) => {
        const seen = new Set<string>();
        for (const k of keys) {
          if (seen.has(k)) duplicates.push(`${o.kind}/${o.metadata.name} ${what} ${k}`);
          seen.add(k);
        }
      };
      check(
        'volume',
        (pod.volumes ?? []).map((v: { name: string }) => v.name),
      );
      for (const c of pod.containers as Doc[]) {
        check(
          'env',
          (c.env ?? []).map((e: { name: string }) => e.name),
        );
        check(
          'mount',
          (c.volumeMounts ?? []).map((m: { mountPath: string }) => m.mountPath),
        );
      }
    }
    expect(duplicates).to.deep.equal([]);
    expect(podSpecs.length).to.be.greaterThan(8);
  });
});
