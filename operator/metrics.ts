import { Histogram, registeredCounter, registeredGauge, type Counter, type Gauge, type Registry } from '../images/service-kit/src/index.js';

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
    reconcileTotal: registeredCounter(registry, 'strata_operator_reconcile_total', 'Reconciles by controller and result (success, requeue, error)', [
      'controller',
      'result',
    ]),
    reconcileDuration: new Histogram({
      name: 'strata_operator_reconcile_duration_seconds',
      help: 'Reconcile duration in seconds by controller',
      labelNames: ['controller'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    queueDepth: registeredGauge(registry, 'strata_operator_workqueue_depth', 'Keys waiting in the work queue by controller', ['controller']),
    queueRetries: registeredCounter(registry, 'strata_operator_workqueue_retries_total', 'Keys re-queued with backoff after a failed reconcile', [
      'controller',
    ]),
    isLeader: registeredGauge(registry, 'strata_operator_leader', '1 while this replica holds the leader lease'),
  };
}
