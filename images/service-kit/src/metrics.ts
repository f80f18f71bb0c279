import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type http from 'node:http';
import { uncaughtErrors } from './last-resort.js';

export { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';

/** One registry per service, with process metrics (the process-wide uncaught-error count among them) and a `service` default label. */
export function createRegistry(service: string, withDefaults = true): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (withDefaults) collectDefaultMetrics({ register: registry });
  registry.registerMetric(uncaughtErrors);
  return registry;
}

/** A counter in `registry`, by the labels named. */
export function registeredCounter<L extends string = never>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return new Counter({ name, help, labelNames, registers: [registry] });
}

/** A gauge in `registry`, by the labels named. */
export function registeredGauge<L extends string = never>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return new Gauge({ name, help, labelNames, registers: [registry] });
}

export interface HttpMetrics {
  requests: Counter<'method' | 'route' | 'status'>;
  duration: Histogram<'method' | 'route' | 'status'>;
  /** Counts every request it sees once answered; mountable in Express (whose requests extend Node's) and in a plain chain. */
  middleware: (req: http.IncomingMessage, res: http.ServerResponse, next: () => void) => void;
  /** Count one request once answered, under `route` (default: as the middleware names it): for handlers that route requests themselves. */
  observe(req: http.IncomingMessage, res: http.ServerResponse, route?: string): void;
}

/** A request as Express's router leaves it: the matched route's pattern, once one matched. */
type RoutedRequest = http.IncomingMessage & { route?: { path?: unknown } };

/**
 * Request count and latency by method, route and status. `routeOf` names the route (low cardinality);
 * by default Express's matched route pattern, else "unmatched".
 */
export function httpMetrics(registry: Registry, routeOf?: (req: http.IncomingMessage, res: http.ServerResponse) => string): HttpMetrics {
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests handled, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency in seconds, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const observe = (req: http.IncomingMessage, res: http.ServerResponse, route?: string) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const labels = {
        method: req.method ?? '',
        route: route ?? (routeOf ? routeOf(req, res) : (((req as RoutedRequest).route?.path as string | undefined) ?? 'unmatched')),
        status: String(res.statusCode),
      };
      requests.inc(labels);
      duration.observe(labels, Number(process.hrtime.bigint() - start) / 1e9);
    });
  };
  const middleware = (req: http.IncomingMessage, res: http.ServerResponse, next: () => void) => {
    observe(req, res);
    next();
  };
  return { requests, duration, middleware, observe };
}

/**
 * Increments of `counter` by the value of its one label `label`, added up in memory and handed to the
 * counter when it is read (a scrape, or any `get()`): a hot path pays a Map update instead of
 * prom-client's label object, validation and hashing per call. What a reader sees is the same.
 */
export function deferredCounts<L extends string>(counter: Counter<L>, label: L): (value: string, n?: number) => void {
  const pending = new Map<string, number>();
  const held = counter as Counter<L> & { collect?: (this: Counter<L>) => unknown };
  const before = held.collect;
  held.collect = function (this: Counter<L>) {
    for (const [value, n] of pending) this.inc({ [label]: value } as Partial<Record<L, string>>, n);
    pending.clear();
    return before?.call(this);
  };
  return (value, n = 1) => {
    pending.set(value, (pending.get(value) ?? 0) + n);
  };
}
