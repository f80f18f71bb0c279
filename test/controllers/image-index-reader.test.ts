import { expect } from 'chai';
import { ImageIndexReconciler } from '../../controllers/image-index/image-index-reconciler.js';
import type { IndexWorkerClient } from '../../controllers/image-index/index-worker-client.js';
import { renderImageIndex } from '../../controllers/image-index/render-image-index.js';
import { READER_FINALIZER, type ReaderKey, type ReaderKeyService, type ReaderResource } from '../../controllers/image-index/source-reader.js';
import { imageIndexSpec, type ImageIndex } from '../../controllers/api/index.js';
import type { StackAccess } from '../../controllers/bucket/bucket-service.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import {
  eventReasons,
  eventually,
  markDeploymentReady,
  mustGet,
  startHarness,
  stored,
  TEST_SETTINGS,
  validateStored,
  type Doc,
  type Harness,
} from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

const NS = 'search';
const ROOT_SECRET = 'strata-root-credentials';
const indexCr = (spec: object = {}) => ({
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'ImageIndex',
  metadata: { name: 'photos', namespace: NS },
  spec: { source: { bucket: 'photos', prefix: 'img/' }, model: { directory: '/models/clip' }, ...spec },
});
const ixRef = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', namespace: NS, name: 'photos' };

/** Every Secret a pod template's containers read (env and envFrom). */
function secretsReadBy(deployment: Doc): string[] {
  const names = new Set<string>();
  for (const c of deployment.spec.template.spec.containers as Doc[]) {
    for (const e of (c.env ?? []) as Doc[]) if (e.valueFrom?.secretKeyRef) names.add(e.valueFrom.secretKeyRef.name);
    for (const e of (c.envFrom ?? []) as Doc[]) if (e.secretRef) names.add(e.secretRef.name);
  }
  return [...names].sort();
}

/** The object store's scoped keys, as the control plane keeps them by name (records every call). */
class StubKeys {
  readonly keys = new Map<string, { parent: string; resources: ReaderResource[]; key: ReaderKey }>();
  readonly calls: string[] = [];
  lastAccess?: StackAccess;
  factory = (access: StackAccess): ReaderKeyService => {
    this.lastAccess = access;
    return {
      ensure: async (name, parent, resources, key) => {
        this.calls.push(`ensure ${name}`);
        this.keys.set(name, { parent, resources, key });
      },
      remove: async (name) => {
        this.calls.push(`remove ${name}`);
        this.keys.delete(name);
      },
    };
  };
}

const idleWorker: IndexWorkerClient = { status: async () => ({ vectors: 0, bufferSize: 0 }) };

describe('ImageIndex reconciler: the worker reads its source with a scoped read-only key, never the root keys', () => {
  it('renders a worker that reads no root credentials, only its own reader Secret (bucket source and bucket model)', async () => {
    for (const spec of [{}, { model: { bucket: 'models', prefix: 'clip/' } }]) {
      const ix = indexCr(spec) as unknown as ImageIndex;
      const objs = renderImageIndex(ix, imageIndexSpec.parse(ix.spec), TEST_SETTINGS);
      for (const o of objs) await validateManifest(o);
      const deployment = objs.find((o) => o.kind === 'Deployment') as Doc;
      const secrets = secretsReadBy(deployment);
      expect(secrets).to.not.include(ROOT_SECRET);
      expect(secrets).to.include('photos-index-reader');
      const env = Object.fromEntries((deployment.spec.template.spec.containers[0].env as Doc[]).map((e) => [e.name, e.valueFrom?.secretKeyRef]));
      expect(env.IMAGE_SEARCH_S3_ACCESS_KEY_ID).to.deep.equal({ name: 'photos-index-reader', key: 'accessKey' });
      expect(env.IMAGE_SEARCH_S3_SECRET_ACCESS_KEY).to.deep.equal({ name: 'photos-index-reader', key: 'secretKey' });
    }
  });

  describe('against the fake API server', function () {
    this.timeout(60_000);
    let h: Harness;
    let keys: StubKeys;
    beforeEach(async () => {
      h = await startHarness();
      keys = new StubKeys();
      h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, idleWorker, keys.factory)]);
    });
    afterEach(() => h.stop());

    /** The namespace's object store as the Bucket controller leaves it: its Secrets, and its control plane and gateway ready. */
    const storeReady = async () => {
      await h.kube.apply({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: ROOT_SECRET, namespace: NS },
        stringData: { STRATA_ROOT_USER: 'root', STRATA_ROOT_PASSWORD: 'root-password' },
      } as never);
      await h.kube.apply({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'strata-internal', namespace: NS },
        stringData: { STRATA_INTERNAL_TOKEN: 'internal-token' },
      } as never);
      for (const name of ['strata-control-plane', 'strata-gateway']) {
        await h.kube.apply({
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name, namespace: NS },
          spec: {
            selector: { matchLabels: { app: name } },
            template: { metadata: { labels: { app: name } }, spec: { containers: [{ name, image: 'strata/test' }] } },
          },
        } as never);
        markDeploymentReady(h.fake, NS, name);
      }
    };
    const index = () => mustGet(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos') as unknown as ImageIndex & { status?: Doc };

    it('waits for the object store, then makes one key for the source bucket and prefix, hands it over in a Secret of its own and shows it in status', async () => {
      await h.kube.apply(indexCr() as never);
      await eventually(() => expect(index().status?.conditions?.find((c: Doc) => c.type === 'Progressing')?.reason).to.equal('WaitingForObjectStore'));
      expect(keys.calls).to.deep.equal([]);
      await storeReady();
      const secret = (await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'photos-index-reader'), 'reader Secret')) as Doc;
      const key = { accessKey: secretValue(secret, 'accessKey')!, secretKey: secretValue(secret, 'secretKey')! };
      expect(key.accessKey).to.match(/^[A-Z2-7]{20}$/);
      expect(key.secretKey).to.have.length(40);
      expect(secret.metadata.ownerReferences[0]).to.include({ kind: 'ImageIndex', name: 'photos', controller: true });
      await eventually(() =>
        expect(keys.keys.get('imageindex.search.photos')).to.deep.equal({ parent: 'root', resources: [{ bucket: 'photos', prefix: 'img/' }], key }),
      );
      expect(keys.lastAccess).to.deep.include({ internalToken: 'internal-token', rootUser: 'root' });
      await eventually(() => expect(index().status).to.include({ sourceCredentials: 'photos-index-reader', sourceAccessKey: key.accessKey }), 'status');
      expect(index().metadata.finalizers).to.include(READER_FINALIZER);
      const deployment = mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker') as Doc;
      expect(secretsReadBy(deployment)).to.not.include(ROOT_SECRET);
      // Reconciled again (a spec change): the same key, its scope brought along; the Secret is never rewritten.
      const version = secret.metadata.resourceVersion;
      await h.kube.apply(indexCr({ source: { bucket: 'photos', prefix: 'img/2026/' } }) as never);
      await eventually(() => expect(keys.keys.get('imageindex.search.photos')?.resources).to.deep.equal([{ bucket: 'photos', prefix: 'img/2026/' }]));
      expect(keys.keys.get('imageindex.search.photos')?.key).to.deep.equal(key);
      expect((mustGet(h.fake, 'v1', 'Secret', NS, 'photos-index-reader') as Doc).metadata.resourceVersion).to.equal(version);
      expect(await validateStored(h.fake)).to.be.greaterThan(0);
    });

    it('deletes the key when the ImageIndex goes, then lets it go', async () => {
      await storeReady();
      await h.kube.apply(indexCr({ model: { bucket: 'models', prefix: 'clip/' } }) as never);
      await eventually(() => expect(keys.keys.get('imageindex.search.photos')?.resources).to.have.length(2), 'key made');
      await h.kube.delete(ixRef);
      await eventually(() => expect(stored(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos')).to.equal(undefined), 'ImageIndex gone');
      expect(keys.keys.size).to.equal(0);
      expect(keys.calls).to.include('remove imageindex.search.photos');
    });

    /** The control plane's Deployment reports no ready replica (the store is down). */
    const storeDown = () => {
      const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
      const d = h.fake.state.get(t, NS, 'strata-control-plane') as Doc;
      h.fake.state.update(t, NS, 'strata-control-plane', { ...d, status: { replicas: 1, readyReplicas: 0 } } as never, 'status');
    };

    it('waits for a store that is down to delete the key, and finishes once it is back', async () => {
      await storeReady();
      await h.kube.apply(indexCr() as never);
      await eventually(() => expect(keys.keys.size).to.equal(1), 'key made');
      storeDown();
      await h.kube.delete(ixRef);
      await eventually(() => expect(index().metadata.deletionTimestamp).to.be.a('string'), 'deletion begun');
      expect(keys.keys.size).to.equal(1);
      markDeploymentReady(h.fake, NS, 'strata-control-plane');
      // (The retry comes after CLEANUP_RETRY_MS; a touch of the resource brings it sooner.)
      await h.kube.mergePatch(ixRef, { metadata: { annotations: { touched: 'yes' } } });
      await eventually(() => expect(stored(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos')).to.equal(undefined), 'ImageIndex gone');
      expect(keys.keys.size).to.equal(0);
    });

    it('lets the ImageIndex go once the stack deletion deadline passed, with a Warning that the key was left', async () => {
      await h.stop();
      h = await startHarness();
      h.start([new ImageIndexReconciler(h.kube, h.events, { ...TEST_SETTINGS, stackDeletionDeadlineSeconds: 0 }, idleWorker, keys.factory)]);
      await storeReady();
      await h.kube.apply(indexCr() as never);
      await eventually(() => expect(keys.keys.size).to.equal(1), 'key made');
      storeDown();
      await h.kube.delete(ixRef);
      await eventually(() => expect(stored(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos')).to.equal(undefined), 'ImageIndex gone');
      expect(keys.keys.size).to.equal(1);
      expect(eventReasons(h.fake, NS, 'photos')).to.include('ReaderKeyLeft');
    });

    it('gives the key back when the spec stops reading a bucket', async () => {
      await storeReady();
      await h.kube.apply(indexCr() as never);
      await eventually(() => expect(keys.keys.size).to.equal(1), 'key made');
      await h.kube.apply(indexCr({ source: { directory: '/images' } }) as never);
      await eventually(() => expect(keys.keys.size).to.equal(0), 'key deleted');
      await eventually(() => expect(index().metadata.finalizers ?? []).to.not.include(READER_FINALIZER), 'finalizer removed');
      await eventually(() => expect(index().status?.sourceCredentials).to.equal(undefined), 'status cleared');
    });

    it('shows a store that refuses the key in status, and still runs the worker (which waits for its key)', async () => {
      await h.stop();
      h = await startHarness();
      const refusing: ReaderKeyService = { ensure: async () => Promise.reject(new Error('control plane answered 503')), remove: async () => undefined };
      h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, idleWorker, () => refusing)]);
      await storeReady();
      await h.kube.apply(indexCr() as never);
      await eventually(() => {
        const progressing = index().status?.conditions?.find((c: Doc) => c.type === 'Progressing');
        expect(progressing?.reason).to.equal('WaitingForReaderKey');
        expect(progressing?.message).to.include('control plane answered 503');
      });
      mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker');
    });
  });
});
