import { Counter, Gauge, Histogram, type Registry } from '../images/service-kit/src/index.js';

/** The operator's Prometheus metrics (the Grafana "operator" dashboard reads these names). */
export interface OperatorMetrics {
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileDuration: Histogram<'controller'>;
  queueDepth: Gauge<'controller'>;
  queueRetries: Counter<'controller'>;
  isLeader: Gauge;
}

export function createOperatorMetrics(registry: Registry): OperatorMetrics {
  return {
    reconcileTotal: new Counter({
      name: 'strata_operator_reconcile_total',
      help: 'Reconciles by controller and result (success, requeue, error)',
      labelNames: ['controller', 'result'] as const,
      registers: [registry],
    }),
    reconcileDuration: new Histogram({
      name: 'strata_operator_reconcile_duration_seconds',
      help: 'Reconcile duration in seconds by controller',
      labelNames: ['controller'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'strata_operator_workqueue_depth',
      help: 'Keys waiting in the work queue by controller',
      labelNames: ['controller'] as const,
      registers: [registry],
    }),
    queueRetries: new Counter({
      name: 'strata_operator_workqueue_retries_total',
      help: 'Keys re-queued with backoff after a failed reconcile',
      labelNames: ['controller'] as const,
      registers: [registry],
    }),
    isLeader: new Gauge({ name: 'strata_operator_leader', help: '1 while this replica holds the leader lease', registers: [registry] }),
  };
}
