import { expect } from 'chai';
import { ModelServerReconciler } from '../../controllers/model-server/model-server-reconciler.js';
import { renderModelServer } from '../../controllers/model-server/render-model-server.js';
import { MODEL_SERVER_DEFAULT_RESOURCES, modelServerSpec, type ModelServer } from '../../controllers/api/index.js';
import { eventReasons, eventually, type Doc, markDeploymentReady, mustGet, harnessHooks, stored, TEST_SETTINGS, validateStored } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';
import { BUILT_IN_MODEL_NAMES } from '../../controllers/api/index.js';
import { modelServerConfigFromEnv } from '../../images/model-server/src/config.js';
import { BUILT_IN_MODELS, configuredModelSources } from '../../images/model-server/src/served-models.js';

const NS = 'ml';
const sample = (spec: object): ModelServer =>
  ({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name: 'tiny', namespace: NS, uid: 'u-1' }, spec }) as ModelServer;

describe('ModelServer reconciler', () => {
  describe('rendering', () => {
    it('renders a valid Deployment and Service with probes, resources and the port', async () => {
      const ms = sample({ replicas: 2, port: 8100, resources: { requests: { cpu: '250m' }, limits: { memory: '512Mi' } } });
      const objs = renderModelServer(ms, modelServerSpec.parse(ms.spec), TEST_SETTINGS);
      for (const o of objs) await validateManifest(o);
      const [deployment, service] = objs as Doc[];
      const container = deployment!.spec.template.spec.containers[0];
      expect(deployment!.spec.replicas).to.equal(2);
      expect(container.ports[0].containerPort).to.equal(8100);
      expect(container.readinessProbe.httpGet.path).to.equal('/readyz');
      expect(container.livenessProbe.httpGet.path).to.equal('/healthz');
      expect(container.resources).to.deep.equal({ requests: { cpu: '250m' }, limits: { memory: '512Mi' } });
      expect(container.image).to.equal('ghcr.io/strata-dev/model-server:test');
      expect(deployment!.spec.template.spec.nodeSelector).to.equal(undefined);
      expect(service!.spec.ports[0].port).to.equal(8100);
      expect(deployment!.metadata.ownerReferences[0]).to.include({ kind: 'ModelServer', name: 'tiny', uid: 'u-1', controller: true });
    });

    it('asks for a GPU with limit, node selector and tolerations', async () => {
      const ms = sample({ gpu: { enabled: true, count: 2 } });
      const [deployment] = renderModelServer(ms, modelServerSpec.parse(ms.spec), TEST_SETTINGS) as Doc[];
      await validateManifest(deployment!);
      const pod = deployment!.spec.template.spec;
      expect(pod.containers[0].resources.limits['nvidia.com/gpu']).to.equal(2);
      // The CUDA variant of the image; an image named in the spec wins.
      expect(pod.containers[0].image).to.equal('ghcr.io/strata-dev/model-server:test-cuda');
      const own = sample({ gpu: { enabled: true }, image: 'registry.local/llm:1' });
      expect((renderModelServer(own, modelServerSpec.parse(own.spec), TEST_SETTINGS) as Doc[])[0]!.spec.template.spec.containers[0].image).to.equal(
        'registry.local/llm:1',
      );
      const plain = renderModelServer(ms, modelServerSpec.parse(ms.spec), { ...TEST_SETTINGS, gpuImageSuffix: '' }) as Doc[];
      expect(plain[0]!.spec.template.spec.containers[0].image).to.equal('ghcr.io/strata-dev/model-server:test');
      expect(pod.nodeSelector).to.deep.equal({ 'nvidia.com/gpu.present': 'true' });
      expect(pod.tolerations).to.deep.equal([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    });
  });

  describe('model and prompt truncation', () => {
    /** What the rendered pod's model server would serve: its env through the server's own config. */
    const served = (spec: object) => {
      const [deployment] = renderModelServer(sample(spec), modelServerSpec.parse(spec), TEST_SETTINGS) as Doc[];
      const env = Object.fromEntries(
        (deployment!.spec.template.spec.containers[0].env as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]),
      );
      const config = modelServerConfigFromEnv(env);
      return { env, config, sources: configuredModelSources(config.modelDir, config.modelNames) };
    };
    const verseDir = BUILT_IN_MODELS.find((m) => m.names.includes('strata-verse'))!.dir;

    it('a ModelServer that names no model serves strata-verse from its own weights, with prompt truncation on', () => {
      const { env, config, sources } = served({});
      expect(env.MODEL_NAMES).to.equal('strata-verse');
      expect(env.MODEL_SERVER_TRUNCATE_PROMPT).to.equal('true');
      expect(config.truncatePrompt).to.equal(true);
      expect(sources).to.deep.equal([{ names: ['strata-verse'], dir: verseDir }]);
    });

    it("model strata-verse loads strata-verse's weights (not strata-tiny's); truncatePrompt: false reaches the server as false", () => {
      const { config, sources } = served({ model: { name: 'strata-verse' }, truncatePrompt: false });
      expect(sources).to.deep.equal([{ names: ['strata-verse'], dir: verseDir }]);
      expect(config.truncatePrompt).to.equal(false);
    });

    it('refuses a built-in name over a path of other weights, and a name of its own without a path', () => {
      expect(() => modelServerSpec.parse({ model: { name: 'strata-verse', path: '/models/other' } })).to.throw(/built-in names load only their own weights/);
      expect(() => modelServerSpec.parse({ model: { name: 'my-llm' } })).to.throw(/without path, name is a built-in model/);
      expect(served({ model: { name: 'my-llm', path: '/models/mine' } }).sources).to.deep.equal([{ names: ['my-llm'], dir: '/models/mine' }]);
    });

    it("the CRD's built-in names are the image's", () => {
      expect([...BUILT_IN_MODEL_NAMES]).to.deep.equal(BUILT_IN_MODELS.flatMap((m) => m.names));
    });
  });

  describe('against the fake API server', () => {
    const h = harnessHooks('each', (h) => h.start([new ModelServerReconciler(h.kube, h.events, TEST_SETTINGS)]));

    it('creates, reports readiness, follows spec updates and repairs drift', async () => {
      await h.kube.apply(sample({ replicas: 2 }) as never);
      const deployment = await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'deployment created');
      expect((deployment.spec as { replicas: number }).replicas).to.equal(2);
      await eventually(() => mustGet(h.fake, 'v1', 'Service', NS, 'tiny-model-server'), 'service created');
      await eventually(() => {
        const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as unknown as ModelServer;
        expect(ms.status?.conditions?.find((c) => c.type === 'Progressing')?.status).to.equal('True');
        expect(ms.status?.observedGeneration).to.equal(1);
      }, 'progressing');

      markDeploymentReady(h.fake, NS, 'tiny-model-server');
      await eventually(() => {
        const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as unknown as ModelServer;
        expect(ms.status?.readyReplicas).to.equal(2);
        expect(ms.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True');
        expect(ms.status?.endpoint).to.equal('http://tiny-model-server.ml.svc.cluster.local:8000/v1');
      }, 'ready');
      await eventually(() => expect(eventReasons(h.fake, NS, 'tiny')).to.include('ReplicasReady'), 'ready event');

      // Spec update: replicas 3 → Deployment follows, generation observed.
      await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', namespace: NS, name: 'tiny' }, { spec: { replicas: 3 } });
      await eventually(() => {
        const d = mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server');
        expect((d.spec as { replicas: number }).replicas).to.equal(3);
        const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as unknown as ModelServer;
        expect(ms.status?.observedGeneration).to.equal(2);
      }, 'scaled');

      // Drift: someone edits the Deployment's image, then deletes the Service.
      await h.kube.mergePatch(
        { apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'tiny-model-server' },
        {
          spec: { template: { spec: { containers: [{ name: 'model-server', image: 'evil:latest' }] } } },
        },
      );
      await eventually(() => {
        const d = mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server') as Doc;
        expect(d.spec.template.spec.containers[0].image).to.equal('ghcr.io/strata-dev/model-server:test');
      }, 'image restored');
      await h.kube.delete({ apiVersion: 'v1', kind: 'Service', namespace: NS, name: 'tiny-model-server' });
      await eventually(() => mustGet(h.fake, 'v1', 'Service', NS, 'tiny-model-server'), 'service restored');
      // And a deleted Deployment comes back too.
      await h.kube.delete({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'tiny-model-server' });
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'deployment restored');
    });

    it('schedules on GPU nodes when asked, and back on CPU nodes when no longer asked', async () => {
      await h.kube.apply(
        sample({ gpu: { enabled: true, tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'ml', effect: 'NoSchedule' }] } }) as never,
      );
      const pod = () => (mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server') as Doc).spec.template.spec;
      await eventually(() => {
        expect(pod().containers[0].resources.limits).to.deep.equal({ ...MODEL_SERVER_DEFAULT_RESOURCES.limits, 'nvidia.com/gpu': 1 });
        expect(pod().containers[0].env).to.deep.include({ name: 'STRATA_EXECUTION_PROVIDER', value: 'cuda' });
        expect(pod().nodeSelector).to.deep.equal({ 'nvidia.com/gpu.present': 'true' });
        expect(pod().tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Equal', value: 'ml', effect: 'NoSchedule' }]);
      }, 'on GPU');
      expect(await validateStored(h.fake)).to.be.greaterThan(3);
      await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', namespace: NS, name: 'tiny' }, { spec: { gpu: { enabled: false } } });
      await eventually(() => {
        expect(JSON.stringify(pod().containers[0])).to.not.contain('nvidia.com/gpu').and.not.contain('cuda');
        expect(pod().containers[0].image).to.equal('ghcr.io/strata-dev/model-server:test');
        expect(pod().nodeSelector).to.equal(undefined);
        expect(pod().tolerations).to.equal(undefined);
      }, 'back on CPU');
    });

    it('reports a rollout the Deployment controller gave up on as Degraded, with a Warning', async () => {
      await h.kube.apply(sample({ replicas: 1 }) as never);
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'deployment created');
      const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
      const d = h.fake.state.get(t, NS, 'tiny-model-server');
      const stalled = {
        type: 'Progressing',
        status: 'False',
        reason: 'ProgressDeadlineExceeded',
        message: 'ReplicaSet "tiny-model-server-5d8f" has timed out progressing.',
      };
      h.fake.state.update(
        t,
        NS,
        'tiny-model-server',
        { ...d, status: { replicas: 1, readyReplicas: 0, observedGeneration: d.metadata.generation, conditions: [stalled] } },
        'status',
      );
      await eventually(() => {
        const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as unknown as ModelServer;
        expect(ms.status?.conditions?.find((c) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'RolloutStalled' });
        expect(ms.status?.conditions?.find((c) => c.type === 'Degraded')?.message).to.contain('timed out progressing');
      }, 'degraded');
      await eventually(() => {
        const events = h.fake.state.list(h.fake.state.typeForKind('v1', 'Event'), NS).filter((e) => e.reason === 'RolloutStalled');
        expect(events.map((e) => e.type)).to.include('Warning');
      }, 'warning event');
      markDeploymentReady(h.fake, NS, 'tiny-model-server');
      await eventually(() => {
        const ms = mustGet(h.fake, 'strata.dev/v1alpha1', 'ModelServer', NS, 'tiny') as unknown as ModelServer;
        expect(ms.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True');
      }, 'recovered');
    });

    it('leaves cleanup to the garbage collector when the ModelServer is deleted', async () => {
      await h.kube.apply(sample({}) as never);
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server'), 'deployment created');
      await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', namespace: NS, name: 'tiny' });
      await eventually(() => {
        expect(stored(h.fake, 'apps/v1', 'Deployment', NS, 'tiny-model-server')).to.equal(undefined);
        expect(stored(h.fake, 'v1', 'Service', NS, 'tiny-model-server')).to.equal(undefined);
      }, 'owned objects collected');
    });
  });
});
