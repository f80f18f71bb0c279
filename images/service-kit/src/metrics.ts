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
  const pending = new PendingObservations(requests, duration);
  const routed = (req: http.IncomingMessage, res: http.ServerResponse) =>
    routeOf ? routeOf(req, res) : (((req as RoutedRequest).route?.path as string | undefined) ?? 'unmatched');
  // One listener for every response (no closure per request): its start and route ride on the response.
  function answered(this: TimedResponse) {
    const seconds = (performance.now() - this[STARTED]!) / 1000;
    pending.add(this.req.method ?? '', this[ROUTE] ?? routed(this.req, this), this.statusCode, seconds);
  }
  const observe = (_req: http.IncomingMessage, res: http.ServerResponse, route?: string) => {
    const timed = res as TimedResponse;
    timed[STARTED] = performance.now();
    timed[ROUTE] = route;
    // (`on`: a response finishes at most once, and `once` would wrap the listener anew per request.)
    res.on('finish', answered);
  };
  const middleware = (req: http.IncomingMessage, res: http.ServerResponse, next: () => void) => {
    observe(req, res);
    next();
  };
  return { requests, duration, middleware, observe };
}

const STARTED = Symbol('strata.metrics-started');
const ROUTE = Symbol('strata.metrics-route');
type TimedResponse = http.ServerResponse & { [STARTED]?: number; [ROUTE]?: string };
type HttpLabels = { method: string; route: string; status: string };

/**
 * Request counts and latencies kept by (method, route, status) and handed to prom-client when either metric
 * is read (a scrape, or any `get()`) or a label set has gathered FLUSH_AT latencies (memory stays bounded
 * between scrapes): a request pays a key, a Map lookup and an array push instead of a label object and the
 * counter's label hashing; the histogram still files each latency (prom-client has no bulk observe), in
 * batches. What a reader sees is the same.
 */
class PendingObservations {
  private readonly byKey = new Map<string, { labels: HttpLabels; seconds: number[] }>();
  static readonly FLUSH_AT = 512;

  constructor(
    private readonly requests: Counter<'method' | 'route' | 'status'>,
    private readonly duration: Histogram<'method' | 'route' | 'status'>,
  ) {
    for (const metric of [requests, duration] as Array<{ collect?: () => unknown }>) {
      const before = metric.collect;
      metric.collect = () => {
        this.flush();
        return before?.call(metric);
      };
    }
  }

  add(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`;
    let entry = this.byKey.get(key);
    if (entry === undefined) this.byKey.set(key, (entry = { labels: { method, route, status: String(status) }, seconds: [] }));
    entry.seconds.push(seconds);
    if (entry.seconds.length >= PendingObservations.FLUSH_AT) this.flushEntry(entry);
  }

  private flush(): void {
    for (const entry of this.byKey.values()) this.flushEntry(entry);
  }

  private flushEntry(entry: { labels: HttpLabels; seconds: number[] }): void {
    if (entry.seconds.length === 0) return;
    this.requests.inc(entry.labels, entry.seconds.length);
    for (const s of entry.seconds) this.duration.observe(entry.labels, s);
    entry.seconds.length = 0;
  }
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
