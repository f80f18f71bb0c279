import express, { type Router } from 'express';
import type { FairPool, Logger, TrustedProxies } from '../../service-kit/src/index.js';
import { HttpError } from './http-errors.js';
import type { PoemMetrics } from './poem-metrics.js';
import type { PoemStore } from './poem-store.js';
import { POEM_TYPES } from './poem-types.js';
import { UpstreamError, type Poet } from './poet.js';
import { parseGenerateRequest, parseListLimit, parseSaveRequest } from './requests.js';
import { requireWriteAccess, type WriteAccess } from './write-access.js';

export interface PoemApiDeps {
  store: PoemStore;
  poet: Poet;
  metrics: PoemMetrics;
  logger: Logger;
  /** Who may change the history (save, delete). */
  writes: WriteAccess;
  /** Poems being written, shared fairly between visitors (by address, as `proxies` tell it). */
  generations: FairPool;
  proxies: TrustedProxies;
}

/** Request bodies are small JSON documents; anything bigger is refused with 413 before parsing. */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** The JSON API under /api: poem types, generation, and saved history. */
export function poemApi({ store, poet, metrics, logger, writes, generations, proxies }: PoemApiDeps): Router {
  const api = express.Router();
  api.use(express.json({ limit: BODY_LIMIT_BYTES }));

  api.get('/info', (_req, res) => {
    res.json({ ...poet.upstream, historyWrites: writes.mode });
  });

  api.get('/poem-types', (_req, res) => {
    res.json({ types: POEM_TYPES.map(({ code, label, description }) => ({ code, label, description })) });
  });

  api.post('/generate-poem', async (req, res) => {
    const { type, theme } = parseGenerateRequest(req.body);
    // One visitor's flood of generations leaves room (and upstream calls) for the others.
    const slot = generations.tryTake(proxies.clientAddress(req));
    if (typeof slot === 'string') {
      metrics.generations.inc({ type: type.code, outcome: 'busy' });
      res.setHeader('Retry-After', '1');
      throw new HttpError(429, 'busy', 'too many poems are being written for you right now; please wait for one to finish and try again');
    }
    res.once('close', slot);
    // A visitor who leaves or reloads cancels the upstream call instead of leaving it running.
    const cancel = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) cancel.abort();
    });
    const stopTimer = metrics.generationSeconds.startTimer();
    try {
      const { poem, requests, themeAdded } = await poet.write(type, theme, cancel.signal);
      const seconds = stopTimer({ outcome: 'ok' });
      metrics.generations.inc({ type: type.code, outcome: 'ok' });
      logger.info({ type: type.code, themeLength: theme.length, poemLength: poem.length, requests, themeAdded, seconds }, 'poem generated');
      res.json({ poem, type: { code: type.code, label: type.label }, theme, model: poet.model });
    } catch (err) {
      const outcome = err instanceof UpstreamError ? err.failure : 'upstream_error';
      const seconds = stopTimer({ outcome });
      metrics.generations.inc({ type: type.code, outcome });
      const reason = err instanceof UpstreamError ? err.upstreamReason : String(err);
      logger.warn({ type: type.code, outcome, seconds, reason }, 'poem generation failed');
      throw err;
    }
  });

  api.get('/poems', (req, res) => {
    const limit = parseListLimit(req.query.limit);
    res.json({ poems: store.list(limit) });
  });

  api.get('/poems/:id', (req, res) => {
    const poem = /^\d{1,15}$/.test(req.params.id) ? store.get(Number(req.params.id)) : undefined;
    if (!poem) throw new HttpError(404, 'not_found', `no saved poem with id ${req.params.id}`);
    res.json(poem);
  });

  api.delete('/poems/:id', requireWriteAccess(writes), (req, res) => {
    const id = String(req.params.id);
    const removed = /^\d{1,15}$/.test(id) && store.remove(Number(id));
    if (!removed) throw new HttpError(404, 'not_found', `no saved poem with id ${id}`);
    metrics.deleted.inc();
    logger.info({ id: Number(id) }, 'poem deleted');
    res.status(204).end();
  });

  api.post('/poems', requireWriteAccess(writes), (req, res) => {
    const { type, theme, content, model } = parseSaveRequest(req.body);
    const poem = store.add({ type: type.label, theme, content, model });
    metrics.saved.inc({ type: type.label });
    logger.info({ id: poem.id, type: type.code }, 'poem saved');
    res.status(201).location(`/api/poems/${poem.id}`).json(poem);
  });

  return api;
}
