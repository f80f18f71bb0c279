import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express, type Request, type Response } from 'express';
import { AnswerDelivery, bodyPending, DeliveredResponse } from './answer-delivery.js';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, refuseSlowBodyJson, watchBodyIdle, type RefuseSlowBody } from './body-idle.js';
import { PipeEnd, serveInProcess } from './in-process-http.js';
import type { Logger } from './logger.js';
import { loopbackHostCheck, type HostCheckOptions } from './loopback-guard.js';
import type { Registry } from './metrics.js';
import { cutStalledReaders, DEFAULT_READER_IDLE_TIMEOUT_MS } from './reader-idle.js';

/** A readiness check: resolves when the dependency is usable, throws (or rejects) when not. */
export type ReadinessCheck = () => Promise<void> | void;

export interface ServiceOptions {
  name: string;
  logger: Logger;
  registry: Registry;
  /** Named dependency checks for /readyz. */
  readiness?: Record<string, ReadinessCheck>;
  /** Run on shutdown after the HTTP server has drained, in order (close pools, brokers...). */
  onClose?: Array<() => Promise<void> | void>;
}

export interface RunningService {
  name: string;
  server: http.Server;
  port: number;
  url: string;
  /** Stop accepting, let in-flight requests finish (up to graceMs), then run the close hooks. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Mount /healthz, /readyz and /metrics on an Express app. Call before the service's own routes so that
 * probes never pass through auth or flow control.
 */
export function mountOps(app: Express, opts: ServiceOptions): void {
  let shuttingDown = false;
  app.locals.markShuttingDown = () => {
    shuttingDown = true;
  };
  app.get('/healthz', (_req: Request, res: Response) => {
    res.json({ status: 'ok', service: opts.name });
  });
  app.get('/readyz', async (_req: Request, res: Response) => {
    if (shuttingDown) {
      res.status(503).json({ status: 'shutting-down', service: opts.name });
      return;
    }
    const checks: Record<string, string> = {};
    let ok = true;
    for (const [name, check] of Object.entries(opts.readiness ?? {})) {
      try {
        await check();
        checks[name] = 'ok';
      } catch (err) {
        ok = false;
        checks[name] = err instanceof Error ? err.message : String(err);
      }
    }
    res.status(ok ? 200 : 503).json({ status: ok ? 'ok' : 'unavailable', service: opts.name, checks });
  });
  app.get('/metrics', async (_req: Request, res: Response) => {
    res.setHeader('Content-Type', opts.registry.contentType);
    res.end(await opts.registry.metrics());
  });
}

/** A new Express app with the ops endpoints mounted and the x-powered-by header off. */
export function createApp(opts: ServiceOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  mountOps(app, opts);
  return app;
}

/** Limits on clients that stop sending their bodies or reading their answers, for every request of a service. */
export interface SlowClientOptions {
  /** Silence, ms, after which a body still arriving is refused and its connection closed (default 20 s; body-idle.ts); 0: no limit. */
  bodyIdleMs?: number;
  /** The answer to it, in the service's error shape (default: JSON `request_timeout`, 408). */
  refuseSlowBody?: RefuseSlowBody;
  /** An answer its client takes nothing of for this long (ms) is cut with its connection (default 30 s; reader-idle.ts); 0: never. */
  readerIdleMs?: number;
}

/**
 * Listen on host:port (port 0 picks a free one) and return a handle whose stop() drains gracefully.
 * `handler` is any request listener; one that carries an app's `locals` (an Express app, or a listener
 * made around one) has /readyz answer "shutting down" once stop() begins. With `hostCheck`, a service
 * bound to a loopback address refuses foreign Host and Origin names (loopback-guard.ts); with
 * `slowClients`, a request body that goes silent is refused (body-idle.ts), and an answer its client
 * does not read is cut (reader-idle.ts).
 */
export async function listen(
  handler: http.RequestListener & { locals?: Record<string, unknown> },
  opts: ServiceOptions & { port: number; host?: string; hostCheck?: HostCheckOptions; slowClients?: SlowClientOptions },
): Promise<RunningService> {
  const host = opts.host ?? '0.0.0.0';
  // Before any handler (fast paths included): on loopback, requests for foreign Host names are refused.
  const allowed = opts.hostCheck && loopbackHostCheck(host, opts.hostCheck);
  const slow = opts.slowClients;
  const server = http.createServer({ ServerResponse: DeliveredResponse }, (req, res) => {
    if (!delivery.serves(req)) return;
    // Only requests that declare a body: the answers of the others are not timed (a long answer is no slow body).
    if (slow && bodyPending(req)) watchBodyIdle(req, res, slow.bodyIdleMs ?? DEFAULT_BODY_IDLE_TIMEOUT_MS, slow.refuseSlowBody ?? refuseSlowBodyJson);
    if (!allowed || allowed(req, res)) handler(req, res);
  });
  // Requests in flight per socket (answer-delivery.ts), so shutdown can close every socket that is not
  // serving one — including fresh connections that never sent a request, which closeIdleConnections() skips.
  const delivery = new AnswerDelivery(server);
  const stopReaderWatch = slow ? cutStalledReaders(server, slow.readerIdleMs ?? DEFAULT_READER_IDLE_TIMEOUT_MS) : () => undefined;
  /** Resolves once no in-process connection is open (they end through closeIdleSockets or the grace timer). */
  const pipesClosed = async () => {
    for (const [socket] of delivery.connections()) {
      if (socket instanceof PipeEnd && !socket.closed) await new Promise((resolve) => socket.once('close', resolve));
    }
  };
  const closeIdleSockets = () => {
    for (const [socket, n] of delivery.connections()) if (n === 0) socket.destroy();
  };
  // Long uploads must not be cut by Node's default request timeout (a stalled body is the services'
  // own idle limit to judge); a client that has not sent its headers in 20 s is gone.
  server.requestTimeout = 0;
  server.headersTimeout = 20_000;
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
  // Clients in this process (InProcessAgent) reach the server without a socket.
  const leaveInProcess = serveInProcess(url, server);
  opts.logger.info({ port, host }, `${opts.name} listening`);
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 10_000) => {
    stopping ??= (async () => {
      const markShuttingDown = handler.locals?.markShuttingDown as (() => void) | undefined;
      markShuttingDown?.();
      leaveInProcess();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          opts.logger.warn({ graceMs }, 'grace period over, closing remaining connections');
          server.closeAllConnections(); // in-process connections included (each has the server's parser)
        }, graceMs);
        timer.unref();
        // Keep-alive sockets that finish their last request become idle later: sweep them until drained.
        const sweep = setInterval(closeIdleSockets, 50);
        // server.close() waits only for the connections the server accepted: in-process ones (handed
        // to it by another service of this process) are waited for as well, each until its last answer.
        server.close(() => {
          void pipesClosed().then(() => {
            clearTimeout(timer);
            clearInterval(sweep);
            stopReaderWatch();
            resolve();
          });
        });
        closeIdleSockets();
      });
      for (const hook of opts.onClose ?? []) {
        try {
          await hook();
        } catch (err) {
          opts.logger.error({ err }, 'error during shutdown hook');
        }
      }
      opts.logger.info(`${opts.name} stopped`);
    })();
    return stopping;
  };
  return { name: opts.name, server, port, url, stop };
}

/**
 * On SIGTERM/SIGINT, stop every given service (in reverse start order) and exit.
 * A second signal exits at once.
 */
export function stopOnSignals(stoppables: Array<{ stop(): Promise<void> }>, logger: Logger): void {
  let signalled = false;
  const handle = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(1);
    signalled = true;
    logger.info({ signal }, 'shutting down');
    void (async () => {
      for (const s of [...stoppables].reverse()) await s.stop();
      process.exit(0);
    })();
  };
  process.once('SIGTERM', handle);
  process.once('SIGINT', handle);
}
