import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type RequestHandler } from 'express';
import {
  createApp,
  createLogger,
  createRegistry,
  FairPool,
  httpMetrics,
  listen,
  trustedProxies,
  type Logger,
  type Registry,
  type RunningService,
} from '../../service-kit/src/index.js';
import type { PoemAppConfig } from './config.js';
import { apiNotFound, errorHandler } from './http-errors.js';
import { PoemMetrics } from './poem-metrics.js';
import { PoemStore } from './poem-store.js';
import { Poet } from './poet.js';
import { poemApi } from './routes.js';
import { writeAccess } from './write-access.js';

export const SERVICE_NAME = 'poem-app';

/** The page's static files (plain HTML/CSS/JS, no build step). */
export const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../web');

export interface StartPoemAppOptions extends PoemAppConfig {
  /** Share a logger (e.g. the standalone process's); a new one is made otherwise. */
  logger?: Logger;
  registry?: Registry;
}

/**
 * Open (and migrate) the SQLite history, wire the API and the page, and listen.
 * The returned service's stop() drains requests, then closes the database.
 */
export async function startPoemApp(opts: StartPoemAppOptions): Promise<RunningService> {
  const logger = opts.logger ?? createLogger(SERVICE_NAME, opts.logLevel);
  const registry = opts.registry ?? createRegistry(SERVICE_NAME);
  const store = PoemStore.open(opts.databasePath);
  try {
    const service = {
      name: SERVICE_NAME,
      logger,
      registry,
      readiness: { database: () => store.ping() },
      onClose: [() => store.close()],
    };
    const app = createApp(service);
    app.use(httpMetrics(registry).middleware);
    app.use(securityHeaders);
    const writes = writeAccess(opts.host, opts.apiKey);
    const generations = new FairPool(opts.generations?.slots ?? 32, opts.generations?.perVisitor ?? 4);
    const api = poemApi({
      store,
      poet: new Poet(opts.upstream),
      metrics: new PoemMetrics(registry),
      logger,
      writes,
      generations,
      proxies: trustedProxies(opts.trustProxy),
    });
    app.use('/api', api, apiNotFound);
    // Browsers ask for /favicon.ico whatever the page links: the page's SVG icon answers it.
    app.get('/favicon.ico', (_req, res) => res.type('image/svg+xml').sendFile(path.join(WEB_DIR, 'favicon.svg'), { maxAge: opts.production ? '1h' : 0 }));
    app.use(express.static(WEB_DIR, { index: 'index.html', maxAge: opts.production ? '1h' : 0 }));
    app.use(errorHandler(logger));
    const running = await listen(app, {
      ...service,
      port: opts.port,
      host: opts.host,
      hostCheck: { allowedHosts: opts.allowedHosts },
      slowClients: { bodyIdleMs: opts.bodyIdleTimeoutMs, readerIdleMs: opts.readerIdleTimeoutMs },
    });
    logger.info({ database: opts.databasePath, upstream: opts.upstream.baseUrl, model: opts.upstream.model, historyWrites: writes.mode }, 'poem app ready');
    if (writes.mode === 'disabled') logger.warn('poem history writes are off: the app listens beyond localhost without POEM_APP_API_KEY');
    return running;
  } catch (err) {
    store.close();
    throw err;
  }
}

// Everything is served from this origin (no CDN: machines may be offline), so the page can be locked down.
const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'");
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  next();
};
