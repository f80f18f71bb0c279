import { Counter, Gauge, type Registry } from '../../../service-kit/src/index.js';

/** Prometheus metrics of flow control. Reuses metrics already on the registry (several instances). */
export interface FlowMetrics {
  rateLimitRejections: Counter<'route' | 'user_class' | 'scope'>;
  concurrencyRejections: Counter<'route'>;
  tenantRejections: Counter<'tenant' | 'reason'>;
  inFlight: Gauge<'route'>;
  breakerState: Gauge<'upstream'>;
  breakerTransitions: Counter<'upstream' | 'to'>;
  ruleReloads: Counter<'outcome'>;
}

/** Gauge values of `strata_gateway_breaker_state`. */
export const BREAKER_STATE = { closed: 0, halfOpen: 1, open: 2 } as const;

function counter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  return (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] });
}

function gauge<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Gauge<L> {
  return (registry.getSingleMetric(name) as Gauge<L> | undefined) ?? new Gauge({ name, help, labelNames, registers: [registry] });
}

export function flowMetrics(registry: Registry): FlowMetrics {
  return {
    rateLimitRejections: counter(
      registry,
      'strata_gateway_rate_limit_rejections_total',
      'Requests rejected with SlowDown by a rate limit, by route, user class and which limit (route|user|address: an anonymous client address)',
      ['route', 'user_class', 'scope'] as const,
    ),
    concurrencyRejections: counter(
      registry,
      'strata_gateway_concurrency_rejections_total',
      'Requests rejected with SlowDown because the route had too many requests in flight',
      ['route'] as const,
    ),
    tenantRejections: counter(
      registry,
      'strata_gateway_tenant_rejections_total',
      'Requests and connections refused or cut, by tenant (account name; "anonymous"; "-" before one is known) and reason ' +
        '(rate-limit|route-concurrency|reads-tenant-cap|reads-share|reads-pool-full|uploads-*|slow-body|slow-reader|connections-per-address|connections-total)',
      ['tenant', 'reason'] as const,
    ),
    inFlight: gauge(registry, 'strata_gateway_in_flight_requests', 'Requests in flight, by route (routes with a concurrency limit)', ['route'] as const),
    breakerState: gauge(registry, 'strata_gateway_breaker_state', 'Circuit breaker state by upstream: 0 closed, 1 half-open, 2 open', ['upstream'] as const),
    breakerTransitions: counter(
      registry,
      'strata_gateway_breaker_transitions_total',
      'Circuit breaker state changes by upstream and new state (closed|halfOpen|open)',
      ['upstream', 'to'] as const,
    ),
    ruleReloads: counter(
      registry,
      'strata_gateway_flow_rules_reloads_total',
      'Reads of the flow-control rules file by outcome (applied|rejected|unchanged|unreadable)',
      ['outcome'] as const,
    ),
  };
}
