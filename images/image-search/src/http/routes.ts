// The 14 endpoints of image search (the web UI's static files are mounted by app.ts).
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { LlmUpstreamError, type LlmAssistant } from '../llm/assistant.js';
import { TOOLS, WRITE_TOOLS, callTool } from '../llm/tools.js';
import type { ImageAccess, Viewer } from '../image-access.js';
import type { ImageFiles } from '../image-files.js';
import { InputError, type SearchResultItem, type SearchService } from '../search-service.js';
import { UnauthorizedError, type WriteAuthorizer } from './auth.js';
import { errorBody, LlmDisabledError } from './errors.js';
import { querySlots } from './query-slots.js';
import { parseSearchForm } from './upload.js';
import type { MatchQuality } from '../match-quality.js';

export interface RouteOptions {
  service: SearchService;
  llm: LlmAssistant | null;
  webIndexFile: string;
  maxUploadBytes: number;
  /** Who is asking; who may change the index (routes that change state need an admin's token). */
  auth: WriteAuthorizer;
  /** What each caller may read. */
  access: ImageAccess;
  /** The image source's state (sync rounds, skipped objects, last error): admins only, it names keys and paths. */
  sourceStatus: () => object;
  /** How well a text search's results match (a nonsense query gets a hint rather than random images as if they matched). */
  matchQuality: (results: SearchResultItem[]) => MatchQuality;
  /** Extra facts for GET /api/status; server paths only when `admin`. */
  describe: (admin: boolean) => Record<string, unknown>;
  /** Queries in flight, all callers together, and for one caller (IMAGE_SEARCH_QUERY_SLOTS, IMAGE_SEARCH_QUERY_SLOTS_PER_CALLER). */
  querySlots: { slots: number; perCaller: number };
  /** The client's address (X-Forwarded-For from a peer STRATA_TRUST_PROXY names), for anonymous callers' shares. */
  clientAddress: (req: Request) => string;
}

/**
 * Guards /images: bytes of an image go only to a caller who may read it, or against a URL this
 * service signed for one (401 anonymous, 403 otherwise; decided by the path before the file is
 * looked at, so that neither tells whether a private image exists).
 */
export function imageReadGuard(files: ImageFiles, auth: WriteAuthorizer, access: ImageAccess) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const path = files.servedPath(req.path);
    if (path === null) {
      res.status(404).json(errorBody(404, 'no such image'));
      return;
    }
    try {
      const caller = auth.caller(req);
      if (access.mayRead(caller, path) || access.signedFor(path, req.query.expires, req.query.signature)) return next();
      if (caller.kind === 'anonymous') throw new UnauthorizedError(401, 'this image is not public: send a token, or use the URL a search gave you');
      throw new UnauthorizedError(403, 'you may not read this image');
    } catch (err) {
      next(err);
    }
  };
}

/** The message of an LLM failure; anything else is not the LLM's and propagates. */
function llmFailure(err: unknown): string {
  if (err instanceof LlmUpstreamError) return err.message;
  throw err;
}

function body(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) throw new InputError('expected a JSON object body (Content-Type: application/json)');
  return b as Record<string, unknown>;
}

function text(value: unknown, name: string): string {
  if (typeof value !== 'string' || !value.trim()) throw new InputError(`${name} must be a non-empty string`);
  if (value.length > 2000) throw new InputError(`${name} is longer than 2000 characters`);
  return value.trim();
}

export function imageSearchRoutes(opts: RouteOptions): Router {
  const { service } = opts;
  const router = express.Router();
  const viewer = (req: Request): Viewer => opts.access.viewer(opts.auth.caller(req));
  const isAdmin = (req: Request) => opts.auth.caller(req).kind === 'admin';
  const json = express.json({ limit: '256kb' });
  // Every route that encodes a query (or calls the LLM) holds a slot: taken before its body is read.
  const slot = querySlots(opts.auth, opts.querySlots.slots, opts.querySlots.perCaller, opts.clientAddress);
  const llm = () => {
    if (!opts.llm) throw new LlmDisabledError();
    return opts.llm;
  };

  router.get('/', (_req, res) => res.sendFile(opts.webIndexFile));

  // Text query (JSON) or image query (multipart, file field query_img).
  router.post('/search', slot, async (req: Request, res: Response) => {
    if (req.is('multipart/form-data')) {
      const form = await parseSearchForm(req, opts.maxUploadBytes);
      const topk = service.topk(form.fields.topk);
      if (form.image) {
        if (!form.image.data.length) throw new InputError('query_img is empty');
        const results = await service.searchImage(form.image.data, topk, viewer(req));
        res.json({ query: { image: form.image.name }, topk, results, total_results: results.length });
        return;
      }
      if (!form.fields.query) throw new InputError('send a text "query" or an image file in field "query_img"');
      const query = text(form.fields.query, 'query');
      const results = await service.searchTexts([query], topk, viewer(req));
      res.json({ query, topk, results, total_results: results.length, ...opts.matchQuality(results) });
      return;
    }
    await new Promise<void>((resolve, reject) => json(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
    const b = body(req);
    const query = text(b.query, 'query');
    const topk = service.topk(b.topk);
    const results = await service.searchTexts([query], topk, viewer(req));
    res.json({ query, topk, results, total_results: results.length, ...opts.matchQuality(results) });
  });

  router.post('/api/search/rag', slot, json, async (req, res) => {
    const b = body(req);
    const query = text(b.query, 'query');
    const topk = service.topk(b.topk);
    if (b.use_expansion !== undefined && typeof b.use_expansion !== 'boolean') throw new InputError('use_expansion must be a boolean');
    const expand = b.use_expansion !== false;
    const llmAssistant = opts.llm;
    if (!llmAssistant) {
      const results = await service.searchTexts([query], topk, viewer(req));
      const note = 'LLM assistance is disabled (LLM_BASE_URL is not set): plain vector retrieval, no expansion or explanation.';
      // No explanation is `null` with a note, the same shape as when the LLM fails.
      res.json({
        original_query: query,
        expanded_queries: [query],
        results,
        ai_explanation: null,
        note,
        total_results: results.length,
        llmEnabled: false,
        ...opts.matchQuality(results),
      });
      return;
    }
    // When the LLM fails, the search still answers: plain retrieval, with a note saying why.
    let failure: string | undefined;
    const orFallback = async <T>(call: () => Promise<T>, fallback: T): Promise<T> => {
      if (failure) return fallback;
      try {
        return await call();
      } catch (err) {
        failure = llmFailure(err);
        return fallback;
      }
    };
    const expanded = expand ? await orFallback(() => llmAssistant.expand(query), [query]) : [query];
    const results: SearchResultItem[] = await service.searchTexts(expanded, topk, viewer(req));
    const explanation = await orFallback(() => llmAssistant.explain(query, results, service), null);
    res.json({
      original_query: query,
      expanded_queries: expanded,
      results,
      ai_explanation: explanation,
      total_results: results.length,
      llmEnabled: true,
      ...opts.matchQuality(results),
      ...(failure
        ? {
            note: `The LLM failed (${failure}): plain vector retrieval${expanded.length > 1 ? ' of the expanded queries' : ''}, no explanation.`,
            llmError: failure,
          }
        : {}),
    });
  });

  router.post('/api/search/expand', slot, json, async (req, res) => {
    const b = body(req);
    const query = text(b.query, 'query');
    const n = b.n === undefined ? 3 : Number(b.n);
    if (!Number.isInteger(n) || n < 1 || n > 10) throw new InputError('n must be an integer from 1 to 10');
    const expanded = await llm().expand(query, n);
    res.json({ original_query: query, expanded_queries: expanded });
  });

  router.post('/api/rag/qa', slot, json, async (req, res) => {
    const b = body(req);
    const question = text(b.question ?? b.query, 'question');
    const assistant = llm();
    const topk = service.topk(b.topk ?? 5);
    const results = await service.searchTexts([question], topk, viewer(req));
    const answer = await assistant.answer(question, results, service);
    res.json({ question, answer, results, total_results: results.length });
  });

  router.post('/api/chat', slot, json, async (req, res) => {
    const b = body(req);
    const history = parseHistory(b);
    const turn = await llm().chat(history, service, { canWrite: opts.auth.decide(req).ok, viewer: viewer(req) });
    res.json({ reply: turn.reply, toolCalls: turn.toolCalls, messages: turn.messages, ...(turn.note ? { note: turn.note } : {}) });
  });

  router.get('/api/tools', (_req, res) => res.json({ tools: TOOLS, writeTools: [...WRITE_TOOLS] }));

  router.post('/api/tools/call', slot, json, async (req, res) => {
    const b = body(req);
    const tool = text(b.tool, 'tool');
    if (b.arguments !== undefined && (typeof b.arguments !== 'object' || b.arguments === null || Array.isArray(b.arguments))) {
      throw new InputError('arguments must be a JSON object');
    }
    if (WRITE_TOOLS.has(tool)) opts.auth.require(req);
    res.json({ tool, result: await callTool(service, tool, b.arguments ?? {}, { canWrite: WRITE_TOOLS.has(tool), viewer: viewer(req) }) });
  });

  // The image directory is a server path, the source's state names object keys: admins only.
  router.get('/api/index/status', (req, res) =>
    res.json({ ...service.index.status(), ...(isAdmin(req) ? { imageDir: service.files.root, source: opts.sourceStatus() } : {}) }),
  );

  const guard = opts.auth.guard;
  router.post('/api/index/add', guard, slot, json, async (req, res) => {
    const result = await service.addPaths(body(req).image_paths, viewer(req));
    res.json({ ...result, buffer: service.index.status().buffer });
  });

  router.post('/api/index/remove', guard, json, async (req, res) => {
    res.json(await service.removeIds(body(req).image_ids));
  });

  router.post('/api/index/merge', guard, (_req, res) => {
    res.status(202).json({ job: service.index.merge() });
  });

  router.post('/api/index/rebuild', guard, (_req, res) => {
    res.status(202).json({ job: service.index.rebuild() });
  });

  router.get('/api/status', (req, res) => res.json(opts.describe(isAdmin(req))));

  return router;
}

/** {messages: [{role, content}]} or {message: "..."} (a one-message conversation). */
function parseHistory(b: Record<string, unknown>): ChatCompletionMessageParam[] {
  if (typeof b.message === 'string') return [{ role: 'user', content: text(b.message, 'message') }];
  if (!Array.isArray(b.messages) || b.messages.length === 0 || b.messages.length > 50) {
    throw new InputError('send "message" (a string) or "messages" (1 to 50 chat messages)');
  }
  return b.messages.map((m: unknown, i) => {
    const msg = m as { role?: unknown; content?: unknown };
    if (!msg || typeof msg !== 'object' || !['user', 'assistant', 'system'].includes(msg.role as string) || typeof msg.content !== 'string') {
      throw new InputError(`messages[${i}] must be {role: user|assistant|system, content: string}`);
    }
    return { role: msg.role, content: msg.content } as ChatCompletionMessageParam;
  });
}
