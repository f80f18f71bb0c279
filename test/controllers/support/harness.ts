import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { createLogger, createRegistry } from '../../../images/service-kit/src/index.js';
import { FakeKubeServer, type KubeObject } from '../../support/fake-kube/index.js';
import type { Reconciler } from '../../../controllers/support/reconciler.js';
import { DEFAULT_SETTINGS, type OperatorSettings } from '../../../controllers/support/settings.js';
import { CachedKubeClient } from '../../../operator/cached-kube-client.js';
import { ClientNodeKubeClient } from '../../../operator/kube-client.js';
import { SharedInformerFactory } from '../../../operator/shared-informer.js';
import { KubeEventRecorder } from '../../../operator/event-recorder.js';
import { Manager, type ManagerOptions } from '../../../operator/manager.js';
import { createOperatorMetrics } from '../../../operator/metrics.js';
import type { EventRecorder, KubeClient } from '../../../controllers/support/kube-client.js';
import { validateManifest } from './validate-manifest.js';
import { fixtureHooks } from '../../support/fixture-hooks.js';
import { eventually } from '../../support/eventually.js';

const crdDir = path.resolve(import.meta.dirname, '../../../crds');

/** The generated CRDs, as the fake API server registers them. */
export function loadCrds(): object[] {
  return readdirSync(crdDir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => parseYaml(readFileSync(path.join(crdDir, f), 'utf8')) as object);
}

export const TEST_SETTINGS: OperatorSettings = { ...DEFAULT_SETTINGS, imageTag: 'test' };

export interface Harness {
  fake: FakeKubeServer;
  /** A plain client: every call reaches the API server (what tests use to act as users). */
  kube: KubeClient;
  /** The informers the managers started here run, shared by every controller of one manager. */
  informers: SharedInformerFactory;
  /** The operator's client: reads from `informers`, applies only changed configurations. */
  cached: KubeClient;
  events: EventRecorder;
  start(reconcilers: Reconciler[], extra?: Partial<ManagerOptions>): Manager;
  stop(): Promise<void>;
}

/** A fake API server with Strata's CRDs, a client on it, and managers to run reconcilers. */
export async function startHarness(): Promise<Harness> {
  const fake = await new FakeKubeServer(loadCrds()).start();
  const kc = fake.kubeConfig();
  const logger = createLogger('operator-test', process.env.TEST_LOG_LEVEL ?? 'silent');
  const kube = new ClientNodeKubeClient(kc);
  const events = new KubeEventRecorder(kc, logger);
  const managers: Manager[] = [];
  const informers = new SharedInformerFactory(kc, logger);
  return {
    fake,
    kube,
    informers,
    cached: new CachedKubeClient(kube, informers),
    events,
    start(reconcilers, extra = {}) {
      const manager = new Manager(kc, {
        logger,
        metrics: createOperatorMetrics(createRegistry('operator-test', false)),
        reconcilers,
        workers: 2,
        resyncPeriodMs: 60_000,
        reconcileTimeoutMs: 60_000,
        baseBackoffMs: 20,
        maxBackoffMs: 500,
        // One manager runs on the shared informers; more managers (leader election tests) make their own.
        ...(managers.length === 0 ? { informers } : {}),
        ...extra,
      });
      managers.push(manager);
      manager.start();
      return manager;
    },
    async stop() {
      for (const m of managers) await m.stop();
      await fake.stop();
    },
  };
}

/**
 * Registers hooks that start a harness before the suite (`'suite'`) or before each test (`'each'`)
 * and stop it after; `setUp` runs on each new one (e.g. to start reconcilers). Answers a Harness
 * that stands for the one running now.
 */
export function harnessHooks(scope: 'suite' | 'each', setUp: (h: Harness) => void = () => {}): Harness {
  return fixtureHooks(
    scope,
    async () => {
      const h = await startHarness();
      setUp(h);
      return h;
    },
    (h) => h.stop(),
  );
}

/** Retry an assertion until it passes (state converges asynchronously); fails with the last error. */
export { eventually };

/** Read an object straight from the fake server's storage. */
export function stored(fake: FakeKubeServer, apiVersion: string, kind: string, namespace: string, name: string): KubeObject | undefined {
  const t = fake.state.typeForKind(apiVersion, kind);
  return fake.state.tryGet(t, namespace, name);
}

export function mustGet(fake: FakeKubeServer, apiVersion: string, kind: string, namespace: string, name: string): KubeObject {
  const obj = stored(fake, apiVersion, kind, namespace, name);
  if (!obj) throw new Error(`${kind} ${namespace}/${name} does not exist`);
  return obj;
}

/** Play the part of the Deployment controller: report every replica ready. */
/** Sets the status of the Job `name` in `namespace`, as the Job controller would. */
export function setJobStatus(fake: FakeKubeServer, namespace: string, name: string, status: Record<string, unknown>): void {
  const t = fake.state.typeForKind('batch/v1', 'Job');
  fake.state.update(t, namespace, name, { ...fake.state.get(t, namespace, name), status }, 'status');
}

export function markDeploymentReady(fake: FakeKubeServer, namespace: string, name: string): void {
  const t = fake.state.typeForKind('apps/v1', 'Deployment');
  const d = fake.state.get(t, namespace, name) as KubeObject & { spec: { replicas?: number } };
  const replicas = d.spec.replicas ?? 1;
  fake.state.update(
    t,
    namespace,
    name,
    { ...d, status: { replicas, readyReplicas: replicas, availableReplicas: replicas, updatedReplicas: replicas, observedGeneration: d.metadata.generation } },
    'status',
  );
}

/**
 * Mark the object store's stack ready (the control plane's and the gateway's Deployments), each once
 * it exists: the operator applies the stack one object at a time, so one being there says nothing of the other.
 */
export async function markStackReady(fake: FakeKubeServer, namespace: string): Promise<void> {
  for (const name of ['strata-control-plane', 'strata-gateway']) await eventually(() => markDeploymentReady(fake, namespace, name), `Deployment ${name}`);
}

/**
 * Validate every object the fake API server holds (what the operator created, as stored: defaults,
 * owner references, status) against the official Kubernetes schemas or the generated CRD schema.
 */
export async function validateStored(fake: FakeKubeServer): Promise<number> {
  let n = 0;
  for (const t of fake.state.allTypes()) {
    for (const obj of fake.state.list(t)) {
      await validateManifest(obj);
      n++;
    }
  }
  return n;
}

/** Events recorded about an object, by reason. */
export function eventReasons(fake: FakeKubeServer, namespace: string, name: string): string[] {
  const t = fake.state.typeForKind('v1', 'Event');
  return fake.state
    .list(t, namespace)
    .filter((e) => (e.involvedObject as { name?: string }).name === name)
    .map((e) => e.reason as string);
}

/** Tests read deep into rendered manifests; typing every path would add nothing. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Doc = Record<string, any>;

/** Fixed backing passwords for rendering tests (the operator generates them once per namespace). */
export const TEST_CREDENTIALS = { postgresPassword: 'pg-password', rabbitmqPassword: 'mq-password' } as const;
