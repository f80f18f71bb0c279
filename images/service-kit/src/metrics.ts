import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { NextFunction, Request, Response } from 'express';
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
  middleware: (req: Request, res: Response, next: NextFunction) => void;
}

/**
 * Request count and latency by method, route and status. `routeOf` names the route (low cardinality);
 * by default Express's matched route pattern, else "unmatched".
 */
export function httpMetrics(registry: Registry, routeOf?: (req: Request) => string): HttpMetrics {
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
  const middleware = (req: Request, res: Response, next: NextFunction) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const route = routeOf ? routeOf(req) : ((req.route?.path as string | undefined) ?? 'unmatched');
      const labels = { method: req.method, route, status: String(res.statusCode) };
      requests.inc(labels);
      duration.observe(labels, Number(process.hrtime.bigint() - start) / 1e9);
    });
    next();
  };
  return { requests, duration, middleware };
}
