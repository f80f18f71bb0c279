import type { KubeConfig } from '@kubernetes/client-node';
import { createApp, createLogger, createRegistry, listen, type RunningService } from '../images/service-kit/src/index.js';
import { createReconcilers, type ReconcilerDeps } from '../controllers/index.js';
import { leaderIdentity, settingsFrom, type OperatorEnv } from './config.js';
import { KubeEventRecorder } from './event-recorder.js';
import { CachedKubeClient } from './cached-kube-client.js';
import { ClientNodeKubeClient } from './kube-client.js';
import { Manager } from './manager.js';
import { createOperatorMetrics } from './metrics.js';
import { SharedInformerFactory } from './shared-informer.js';

export interface RunningOperator {
  manager: Manager;
  http: RunningService;
  stop(): Promise<void>;
}

/**
 * The whole operator: the manager with every controller, and /healthz /readyz /metrics over HTTP.
 * `overrides` lets tests reach the object store and index workers through their own servers.
 */
export async function startOperator(
  kc: KubeConfig,
  cfg: OperatorEnv,
  overrides: Partial<Pick<ReconcilerDeps, 'bucketService' | 'indexWorker' | 'readerKeys'>> = {},
  /** What a lost lease does once the reconciles in flight are aborted: exit non-zero, as controller-runtime does. */
  onLeadershipLost: () => void = () => process.exit(1),
): Promise<RunningOperator> {
  const logger = createLogger('operator', cfg.LOG_LEVEL);
  const registry = createRegistry('operator');
  const metrics = createOperatorMetrics(registry);
  const informers = new SharedInformerFactory(kc, logger);
  const requestTimeoutMs = cfg.KUBE_REQUEST_TIMEOUT_SECONDS * 1000;
  const kube = new CachedKubeClient(new ClientNodeKubeClient(kc, requestTimeoutMs), informers);
  const events = new KubeEventRecorder(kc, logger, undefined, requestTimeoutMs);
  const manager = new Manager(kc, {
    logger,
    metrics,
    informers,
    reconcilers: createReconcilers({ kube, events, settings: settingsFrom(cfg), ...overrides }),
    workers: cfg.WORKERS_PER_CONTROLLER,
    resyncPeriodMs: cfg.RESYNC_PERIOD_SECONDS * 1000,
    reconcileTimeoutMs: cfg.RECONCILE_TIMEOUT_SECONDS * 1000,
    onLeadershipLost,
    baseBackoffMs: 100,
    maxBackoffMs: 5 * 60_000,
    namespace: cfg.WATCH_NAMESPACE || undefined,
    leaderElection: cfg.LEADER_ELECTION
      ? {
          namespace: cfg.LEADER_ELECTION_NAMESPACE,
          leaseName: cfg.LEADER_ELECTION_LEASE_NAME,
          identity: leaderIdentity(cfg),
          leaseDurationMs: cfg.LEASE_DURATION_SECONDS * 1000,
          renewDeadlineMs: cfg.RENEW_DEADLINE_SECONDS * 1000,
          retryPeriodMs: cfg.RETRY_PERIOD_SECONDS * 1000,
        }
      : undefined,
  });
  const app = createApp({
    name: 'operator',
    logger,
    registry,
    readiness: {
      manager: () => {
        if (!manager.isReady) throw new Error('controllers not synced');
      },
    },
  });
  app.get('/leader', (_req, res) => {
    res.json({ leader: manager.isLeader });
  });
  const http = await listen(app, { name: 'operator', logger, registry, port: cfg.PORT, onClose: [() => manager.stop()] });
  manager.start();
  return { manager, http, stop: () => http.stop() };
}
