import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import express from 'express';
import { pino } from 'pino';
import { Registry, listen, type Logger, type RunningService } from '../../images/service-kit/src/index.js';
import { flowControl, type FlowControl, type FlowControlOptions } from '../../images/gateway/src/flow-control/index.js';

/** A logger whose lines the test can read. */
export function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

export interface TestGateway {
  url: string;
  fc: FlowControl;
  registry: Registry;
  lines: Array<Record<string, unknown>>;
  /** Requests that reached the handler, by route. */
  served: Map<string, number>;
  /** Hold requests to /hold/* until released. */
  holds: Array<() => void>;
  stop(): Promise<void>;
}

/**
 * A tiny Express app behind the flow-control middleware: route = first path segment, user = the
 * x-user header. `/hold/...` requests wait until the test releases them.
 */
export async function startTestGateway(
  opts: Partial<Pick<FlowControlOptions, 'rulesFile' | 'rules' | 'redis' | 'redisKeyPrefix' | 'debounceMs' | 'pollMs' | 'render' | 'clientAddressOf'>>,
): Promise<TestGateway> {
  const { logger, lines } = capturingLogger();
  const registry = new Registry();
  const fc = await flowControl({
    ...opts,
    logger,
    registry,
    routeOf: (req) => (req.url ?? '/').split(/[/?]/)[1] || 'root',
    userOf: (req) => (req.headers['x-user'] as string | undefined) ?? undefined,
  });
  const served = new Map<string, number>();
  const holds: Array<() => void> = [];
  const app = express();
  app.use(fc.middleware);
  app.use((req, res) => {
    const route = req.path.split('/')[1] || 'root';
    served.set(route, (served.get(route) ?? 0) + 1);
    if (route === 'hold') {
      holds.push(() => res.send('released'));
      return;
    }
    res.send('ok');
  });
  const service: RunningService = await listen(app, { name: 'flow-test', logger, registry, port: 0, host: '127.0.0.1' });
  return {
    url: service.url,
    fc,
    registry,
    lines,
    served,
    holds,
    stop: async () => {
      for (const release of holds.splice(0)) release();
      fc.close();
      await service.stop(1000);
    },
  };
}

export async function hit(url: string, user?: string): Promise<{ status: number; body: string; retryAfter: string | null }> {
  const res = await fetch(url, { headers: user ? { 'x-user': user } : {} });
  return { status: res.status, body: await res.text(), retryAfter: res.headers.get('retry-after') };
}

export function tempDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-flow-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Poll `check` until it returns true (or throw after its timeout); for state the test cannot await. */
export { eventually } from '../support/eventually.js';

export async function metricValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  const match = values.find((v) => Object.entries(labels).every(([k, val]) => String((v.labels as Record<string, unknown>)[k]) === val));
  return match?.value ?? 0;
}
