import { expect } from 'chai';
import { ImageIndexReconciler, MERGE_ANNOTATION } from '../../controllers/image-index/image-index-reconciler.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpIndexWorkerClient, type IndexWorkerClient, type IndexWorkerStatus } from '../../controllers/image-index/index-worker-client.js';
import { renderImageIndex, renderIndexJob } from '../../controllers/image-index/render-image-index.js';
import { imageIndexSpec, type ImageIndex } from '../../controllers/api/index.js';
import type { FakeKubeServer, KubeObject } from '../support/fake-kube/index.js';
import {
  eventReasons,
  eventually,
  markDeploymentReady,
  mustGet,
  setJobStatus,
  startHarness,
  stored,
  TEST_SETTINGS,
  validateStored,
  type Doc,
  type Harness,
} from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

const NS = 'search';
const indexCr = (spec: object, annotations?: Record<string, string>) => ({
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'ImageIndex',
  metadata: { name: 'photos', namespace: NS, uid: 'uid-ix', ...(annotations ? { annotations } : {}) },
  spec: { source: { bucket: 'photos', prefix: 'img/' }, model: { directory: '/models/clip' }, ...spec },
});

/** The worker's answers, settable by the test. */
class StubWorker implements IndexWorkerClient {
  current: IndexWorkerStatus = { vectors: 10, bufferSize: 0 };
  urls: string[] = [];
  async status(url: string): Promise<IndexWorkerStatus> {
    this.urls.push(url);
    return this.current;
  }
}

function jobs(fake: FakeKubeServer): KubeObject[] {
  return fake.state.list(fake.state.typeForKind('batch/v1', 'Job'), NS);
}

/** The Job, once there is exactly one. */
function theOnlyJob(fake: FakeKubeServer, what: string): Promise<KubeObject> {
  return eventually(() => {
    const list = jobs(fake);
    expect(list).to.have.length(1);
    return list[0]!;
  }, what);
}

/** Play the Job controller: the Job ran to completion. */
function completeJob(fake: FakeKubeServer, name: string): void {
  const t = fake.state.typeForKind('batch/v1', 'Job');
  const job = fake.state.get(t, NS, name);
  fake.state.update(
    t,
    NS,
    name,
    { ...job, status: { succeeded: 1, completionTime: '2026-11-22T12:00:00Z', conditions: [{ type: 'Complete', status: 'True' }] } },
    'status',
  );
}

const getIndex = (h: Harness) => mustGet(h.fake, 'strata.dev/v1alpha1', 'ImageIndex', NS, 'photos') as unknown as ImageIndex;

describe('ImageIndex reconciler', () => {
  describe('rendering', () => {
    it('renders a valid worker, Service, state volume and Jobs with the index settings', async () => {
      const ix = indexCr({ index: 'IVF1024,PQ16x8np', nprobe: 8 }) as unknown as ImageIndex;
      const spec = imageIndexSpec.parse(ix.spec);
      const objs = renderImageIndex(ix, spec, TEST_SETTINGS);
      const job = renderIndexJob(ix, 'merge', 'photos-merge-1', TEST_SETTINGS);
      for (const o of [...objs, job]) await validateManifest(o);
      expect(objs.map((o) => o.kind)).to.deep.equal(['PersistentVolumeClaim', 'Deployment', 'Service']);
      const container = (objs[1] as Doc).spec.template.spec.containers[0];
      const env = Object.fromEntries(container.env.map((e: { name: string; value?: string }) => [e.name, e.value ?? 'from-secret']));
      expect(env).to.include({
        IMAGE_SEARCH_INDEX_STRING: 'IVF1024,PQ16x8np',
        IMAGE_SEARCH_NPROBE: '8',
        IMAGE_SEARCH_TOPK: '20',
        IMAGE_SEARCH_BUFFER_THRESHOLD: '1000',
      });
      expect(env).to.include({
        IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/img/',
        IMAGE_SEARCH_MODEL_DIR: '/models/clip',
        IMAGE_SEARCH_S3_ACCESS_KEY_ID: 'from-secret',
      });
      // Object-created events from the namespace's RabbitMQ (when its stack exists), on a queue of this index's own.
      const events = container.env.find((e: { name: string }) => e.name === 'IMAGE_SEARCH_EVENTS_AMQP_URL');
      expect(events.valueFrom.secretKeyRef).to.deep.equal({ name: 'strata-platform', key: 'STRATA_AMQP_URL', optional: true });
      expect(env.IMAGE_SEARCH_EVENTS_QUEUE).to.equal('strata.image-search.search.photos');
      expect((objs[0] as Doc).spec.resources.requests.storage).to.equal('10Gi');
      expect((job as Doc).spec.template.spec.containers[0].env[0].value).to.equal('http://photos-index-worker.search.svc.cluster.local:8080');
    });

    it('gives GPU workers the GPU limit, a node selector and tolerations, and CPU workers none', async () => {
      const gpuIx = indexCr({
        source: { directory: '/images', volumeClaimName: 'catalog' },
        model: { directory: '/models/clip', volumeClaimName: 'clip' },
        gpu: { enabled: true, nodeSelector: { accelerator: 'a100' } },
        resources: { limits: { memory: '8Gi' } },
      }) as unknown as ImageIndex;
      const [, deployment] = renderImageIndex(gpuIx, imageIndexSpec.parse(gpuIx.spec), TEST_SETTINGS) as Doc[];
      await validateManifest(deployment!);
      const pod = deployment!.spec.template.spec;
      expect(pod.containers[0].resources.limits).to.deep.equal({ memory: '8Gi', 'nvidia.com/gpu': 1 });
      expect(pod.nodeSelector).to.deep.equal({ accelerator: 'a100' });
      expect(pod.tolerations[0]).to.include({ key: 'nvidia.com/gpu', effect: 'NoSchedule' });
      // The GPU reserved is used: the CUDA variant of the image (hack/build-images.sh builds image-search:<tag>-cuda).
      expect(pod.containers[0].image).to.equal(`ghcr.io/strata-dev/image-search:test${TEST_SETTINGS.gpuImageSuffix}`);
      expect(TEST_SETTINGS.gpuImageSuffix).to.not.equal('');
      // Images and CLIP files from their volumes, read-only, beside the state volume.
      expect(pod.volumes.map((v: Doc) => v.persistentVolumeClaim)).to.deep.equal([
        { claimName: 'photos-index-state' },
        { claimName: 'catalog', readOnly: true },
        { claimName: 'clip', readOnly: true },
      ]);
      expect(pod.containers[0].volumeMounts.slice(1)).to.deep.equal([
        { name: 'images', mountPath: '/images', readOnly: true },
        { name: 'model', mountPath: '/models/clip', readOnly: true },
      ]);
      const cpuIx = indexCr({}) as unknown as ImageIndex;
      const [, cpu] = renderImageIndex(cpuIx, imageIndexSpec.parse(cpuIx.spec), TEST_SETTINGS) as Doc[];
      expect(cpu!.spec.template.spec.nodeSelector).to.equal(undefined);
      expect(cpu!.spec.template.spec.tolerations).to.equal(undefined);
      expect(JSON.stringify(cpu!.spec.template.spec.containers[0].resources)).to.not.contain('nvidia');
      expect(cpu!.spec.template.spec.containers[0].image).to.equal('ghcr.io/strata-dev/image-search:test');
      const ownImage = indexCr({ gpu: { enabled: true }, image: 'registry.local/image-search:cuda' }) as unknown as ImageIndex;
      const [, own] = renderImageIndex(ownImage, imageIndexSpec.parse(ownImage.spec), TEST_SETTINGS) as Doc[];
      expect(own!.spec.template.spec.containers[0].image).to.equal('registry.local/image-search:cuda');
    });
  });

  it('reads vectors and buffer size from the image-search status API', async () => {
    // The shape GET /api/index/status answers (images/image-search), trimmed to what matters here.
    const server = http.createServer((req, res) => {
      res.writeHead(req.url === '/api/index/status' ? 200 : 404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ indexString: 'IVF4096,PQ32x8', totalVectors: 4200, buffer: { vectors: 77, threshold: 1000, mergeSuggested: false }, job: null }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const status = await new HttpIndexWorkerClient().status(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      expect(status).to.deep.equal({ vectors: 4200, bufferSize: 77, busy: false });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  describe('against the fake API server', () => {
    let h: Harness;
    let worker: StubWorker;
    beforeEach(async () => {
      h = await startHarness();
      worker = new StubWorker();
      h.start([new ImageIndexReconciler(h.kube, h.events, TEST_SETTINGS, worker)]);
    });
    afterEach(() => h.stop());

    const workerReady = async () => {
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker'), 'worker created');
      markDeploymentReady(h.fake, NS, 'photos-index-worker');
    };

    it('runs the worker and reports vectors and buffer size', async () => {
      await h.kube.apply(indexCr({}) as never);
      await eventually(() => mustGet(h.fake, 'v1', 'PersistentVolumeClaim', NS, 'photos-index-state'), 'state volume');
      // The images come from a bucket, and this namespace has no object store yet.
      await eventually(
        () => expect(getIndex(h).status?.conditions?.find((c) => c.type === 'Progressing')?.reason).to.equal('WaitingForObjectStore'),
        'waiting for a store',
      );
      worker.current = { vectors: 1234, bufferSize: 56 };
      await workerReady();
      await eventually(() => {
        const ix = getIndex(h);
        expect(ix.status?.vectors).to.equal(1234);
        expect(ix.status?.bufferSize).to.equal(56);
        expect(ix.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True');
      }, 'status reported');
      expect(jobs(h.fake)).to.have.length(0);
      expect(worker.urls[0]).to.equal('http://photos-index-worker.search.svc.cluster.local:8080');
    });

    it('merges automatically when the buffer exceeds the threshold, once, and records the merge time', async () => {
      worker.current = { vectors: 5000, bufferSize: 1500 };
      await h.kube.apply(indexCr({ bufferThreshold: 1000 }) as never);
      await workerReady();
      const job = await theOnlyJob(h.fake, 'merge job');
      expect(job.metadata.labels?.['strata.dev/index-operation']).to.equal('merge');
      await eventually(() => expect(getIndex(h).status?.activeJob).to.equal(job.metadata.name), 'active job');
      // While it runs, no second merge starts even though the buffer is still large.
      await h.kube.mergePatch(
        { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', namespace: NS, name: 'photos' },
        { metadata: { annotations: { poke: '1' } } },
      );
      await eventually(() => expect(getIndex(h).metadata.generation).to.equal(1), 'poked');
      worker.current = { vectors: 5000, bufferSize: 0 };
      completeJob(h.fake, job.metadata.name);
      await eventually(() => {
        const ix = getIndex(h);
        expect(ix.status?.activeJob).to.equal(undefined);
        expect(ix.status?.lastMergeTime).to.equal('2026-11-22T12:00:00Z');
        expect(ix.status?.bufferSize).to.equal(0);
      }, 'merge recorded');
      expect(jobs(h.fake)).to.have.length(1);
      expect(eventReasons(h.fake, NS, 'photos')).to.include.members(['MergeStarted', 'IndexOperationSucceeded']);
    });

    it('starts no Job while the worker runs an operation of its own, and catches up afterwards', async () => {
      worker.current = { vectors: 5000, bufferSize: 1500, busy: true };
      await h.kube.apply(indexCr({ bufferThreshold: 1000, mergeRequest: 'm1' }) as never);
      await workerReady();
      await eventually(() => expect(getIndex(h).status?.bufferSize).to.equal(1500), 'polled');
      expect(jobs(h.fake)).to.have.length(0);
      expect(getIndex(h).status?.handledMergeRequest).to.equal(undefined);
      worker.current = { vectors: 5000, bufferSize: 1500, busy: false };
      await h.kube.mergePatch(
        { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', namespace: NS, name: 'photos' },
        { metadata: { annotations: { poke: '1' } } },
      );
      await eventually(() => expect(jobs(h.fake)).to.have.length(1), 'merge job once free');
      await eventually(() => expect(getIndex(h).status?.handledMergeRequest).to.equal('m1'), 'request handled');
    });

    it('reports a worker the Deployment controller gave up on as Degraded', async () => {
      await h.kube.apply(indexCr({ source: { directory: '/images' } }) as never);
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker'), 'worker created');
      const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
      const d = h.fake.state.get(t, NS, 'photos-index-worker');
      const stalled = { type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'timed out progressing' };
      h.fake.state.update(t, NS, 'photos-index-worker', { ...d, status: { replicas: 1, readyReplicas: 0, conditions: [stalled] } }, 'status');
      await eventually(
        () => expect(getIndex(h).status?.conditions?.find((c) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'WorkerStalled' }),
        'degraded',
      );
    });

    it('does not auto-merge when autoMerge is off', async () => {
      worker.current = { vectors: 5000, bufferSize: 5000 };
      await h.kube.apply(indexCr({ autoMerge: false }) as never);
      await workerReady();
      await eventually(() => expect(getIndex(h).status?.bufferSize).to.equal(5000), 'status');
      expect(jobs(h.fake)).to.have.length(0);
    });

    const ref = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', namespace: NS, name: 'photos' };
    const workerContainer = () => (mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker') as Doc).spec.template.spec.containers[0];
    const workerEnv = () => Object.fromEntries(workerContainer().env.map((e: { name: string; value?: string }) => [e.name, e.value]));

    it('follows spec updates, repairs drift, and every stored object is schema-valid', async () => {
      await h.kube.apply(indexCr({ nprobe: 16 }) as never);
      await workerReady();
      await eventually(() => expect(getIndex(h).status?.observedGeneration).to.equal(1), 'observed');
      await h.kube.mergePatch(ref, { spec: { nprobe: 64, topk: 50 } });
      await eventually(() => {
        expect(workerEnv()).to.include({ IMAGE_SEARCH_NPROBE: '64', IMAGE_SEARCH_TOPK: '50' });
        expect(getIndex(h).status?.observedGeneration).to.equal(2);
        expect(getIndex(h).status?.conditions?.every((c) => c.observedGeneration === 2)).to.equal(true);
      }, 'update applied');
      // Drift: a hand edit of the worker's image and a deleted Service are both put back.
      await h.kube.mergePatch(
        { apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'photos-index-worker' },
        {
          spec: { template: { spec: { containers: [{ name: 'image-search', image: 'someone/else:latest' }] } } },
        },
      );
      await eventually(() => expect(workerContainer().image).to.equal('ghcr.io/strata-dev/image-search:test'), 'image restored');
      await h.kube.delete({ apiVersion: 'v1', kind: 'Service', namespace: NS, name: 'photos-index-worker' });
      await eventually(() => mustGet(h.fake, 'v1', 'Service', NS, 'photos-index-worker'), 'service restored');
      expect(await validateStored(h.fake)).to.be.greaterThan(5);
    });

    it('gives a GPU worker the GPU limit, node selector and tolerations, and takes them away again', async () => {
      await h.kube.apply(indexCr({ gpu: { enabled: true, count: 2 }, resources: { limits: { memory: '8Gi' } } }) as never);
      await eventually(() => {
        const pod = (mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker') as Doc).spec.template.spec;
        expect(pod.containers[0].resources.limits).to.deep.equal({ memory: '8Gi', 'nvidia.com/gpu': 2 });
        expect(pod.nodeSelector).to.deep.equal({ 'nvidia.com/gpu.present': 'true' });
        expect(pod.tolerations).to.deep.equal([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
      }, 'GPU scheduling');
      await validateStored(h.fake);
      // Server-side apply removes the fields the operator no longer applies.
      await h.kube.mergePatch(ref, { spec: { gpu: { enabled: false } } });
      await eventually(() => {
        const pod = (mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'photos-index-worker') as Doc).spec.template.spec;
        expect(pod.containers[0].resources.limits).to.deep.equal({ memory: '8Gi' });
        expect(pod.nodeSelector).to.equal(undefined);
        expect(pod.tolerations).to.equal(undefined);
      }, 'back on CPU');
    });

    it('reports a failed Job with a Warning and does not rerun the same request', async () => {
      await h.kube.apply(indexCr({ autoMerge: false, mergeRequest: 'm1' }) as never);
      await workerReady();
      const job = await theOnlyJob(h.fake, 'merge job');
      setJobStatus(h.fake, NS, job.metadata.name, { failed: 3, conditions: [{ type: 'Failed', status: 'True' }] });
      await eventually(() => expect(getIndex(h).status?.activeJob).to.equal(undefined), 'job over');
      await eventually(() => expect(eventReasons(h.fake, NS, 'photos')).to.include('IndexOperationFailed'), 'warning event');
      const warning = h.fake.state.list(h.fake.state.typeForKind('v1', 'Event'), NS).find((e) => e.reason === 'IndexOperationFailed')!;
      expect(warning.type).to.equal('Warning');
      expect(getIndex(h).status?.handledMergeRequest).to.equal('m1');
      expect(getIndex(h).status?.lastMergeTime).to.equal(undefined);
      expect(jobs(h.fake)).to.have.length(1);
    });

    it('leaves the worker, its Service, state volume and Jobs to the garbage collector on deletion', async () => {
      await h.kube.apply(indexCr({ autoMerge: false, rebuildRequest: 'r1' }) as never);
      await workerReady();
      await eventually(() => expect(jobs(h.fake)).to.have.length(1), 'rebuild job');
      await h.kube.delete(ref);
      await eventually(() => {
        for (const [apiVersion, kind, name] of [
          ['apps/v1', 'Deployment', 'photos-index-worker'],
          ['v1', 'Service', 'photos-index-worker'],
          ['v1', 'PersistentVolumeClaim', 'photos-index-state'],
        ] as const) {
          expect(stored(h.fake, apiVersion, kind, NS, name), kind).to.equal(undefined);
        }
        expect(jobs(h.fake)).to.have.length(0);
      }, 'owned objects collected');
    });

    it('runs a rebuild on a spec request and a merge on an annotation request, each once per value', async () => {
      await h.kube.apply(indexCr({ autoMerge: false, rebuildRequest: 'r1' }) as never);
      await workerReady();
      const rebuild = await theOnlyJob(h.fake, 'rebuild job');
      expect(rebuild.metadata.labels?.['strata.dev/index-operation']).to.equal('rebuild');
      expect(rebuild.metadata.ownerReferences?.[0]).to.include({ kind: 'ImageIndex', name: 'photos', controller: true });
      completeJob(h.fake, rebuild.metadata.name);
      await eventually(() => expect(getIndex(h).status?.handledRebuildRequest).to.equal('r1'), 'rebuild handled');
      await eventually(() => expect(getIndex(h).status?.activeJob).to.equal(undefined), 'rebuild done');

      await h.kube.mergePatch(
        { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', namespace: NS, name: 'photos' },
        { metadata: { annotations: { [MERGE_ANNOTATION]: 'now-1' } } },
      );
      const merge = await eventually(() => {
        const found = jobs(h.fake).find((j) => j.metadata.labels?.['strata.dev/index-operation'] === 'merge');
        expect(found).to.not.equal(undefined);
        return found!;
      }, 'merge job');
      completeJob(h.fake, merge.metadata.name);
      await eventually(() => {
        const ix = getIndex(h);
        expect(ix.status?.handledMergeRequest).to.equal('now-1');
        expect(ix.status?.activeJob).to.equal(undefined);
        expect(ix.status?.jobCount).to.equal(2);
      }, 'merge handled');
      expect(jobs(h.fake)).to.have.length(2);
    });

    it('deletes the finished Job of a superseded request, keeping the current request\u2019s', async () => {
      await h.kube.apply(indexCr({ autoMerge: false, mergeRequest: 'm1' }) as never);
      await workerReady();
      const first = await theOnlyJob(h.fake, 'first merge');
      completeJob(h.fake, first.metadata.name);
      await eventually(() => expect(getIndex(h).status?.activeJob).to.equal(undefined), 'first merge done');
      await h.kube.apply(indexCr({ autoMerge: false, mergeRequest: 'm2' }) as never);
      const second = await eventually(() => {
        const found = jobs(h.fake).find((j) => j.metadata.name !== first.metadata.name);
        expect(found).to.not.equal(undefined);
        return found!;
      }, 'second merge');
      completeJob(h.fake, second.metadata.name);
      await eventually(() => {
        expect(jobs(h.fake).map((j) => j.metadata.name)).to.deep.equal([second.metadata.name]);
        expect(getIndex(h).status?.handledMergeRequest).to.equal('m2');
        expect(getIndex(h).status?.jobCount).to.equal(1);
        // Each was reported before it went.
        expect(eventReasons(h.fake, NS, 'photos').filter((r) => r === 'IndexOperationSucceeded')).to.have.length(2);
      }, 'superseded Job deleted');
    });
  });
});
