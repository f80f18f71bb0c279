// One JSON error shape for every failure, the other Strata APIs' own: {error: {code, message, ...}}
// (details, unknownIds or job where they help), with the right status.
import OpenAI from 'openai';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../../service-kit/src/index.js';
import { IndexBusyError, UnknownIdsError } from '../index/image-index.js';
import { LlmUpstreamError, upstreamMessage } from '../llm/assistant.js';
import { UnauthorizedError } from './auth.js';
import { QueryBusyError } from './query-slots.js';
import { InputError, ModelUnavailableError } from '../search-service.js';

export class LlmDisabledError extends Error {
  constructor() {
    super('LLM assistance is disabled: set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL) to enable it');
  }
}

const CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'busy',
  502: 'upstream_error',
  503: 'unavailable',
};

/** The body of an error answer: the status's code unless `extra` names a more precise one. */
export function errorBody(status: number, message: string, extra: Record<string, unknown> = {}): { error: Record<string, unknown> } {
  return { error: { code: CODES[status] ?? 'error', message, ...extra } };
}

export function errorHandler(logger: Logger) {
  return (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const send = (status: number, message: string, extra: Record<string, unknown> = {}) => res.status(status).json(errorBody(status, message, extra));
    if (err instanceof UnauthorizedError) {
      if (err.status === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="strata-image-search"');
      return send(err.status, err.message);
    }
    if (err instanceof QueryBusyError) {
      res.setHeader('Retry-After', '1');
      return send(429, err.message);
    }
    if (err instanceof InputError) return send(err.status, err.message, err.details ? { details: err.details } : {});
    if (err instanceof UnknownIdsError) return send(404, err.message, { unknownIds: err.ids });
    if (err instanceof IndexBusyError) return send(409, err.message, { job: err.job });
    if (err instanceof ModelUnavailableError) return send(503, err.message, { code: 'model_missing' });
    if (err instanceof LlmDisabledError) return send(503, err.message, { code: 'llm_disabled' });
    // The LLM's failures (its 4xx included: they are about our request to it, not the client's) are 502s
    // with the upstream's message; checked before any error that merely carries a status.
    if (err instanceof LlmUpstreamError || err instanceof OpenAI.APIError) return send(502, `LLM request failed: ${upstreamMessage(err)}`);
    const e = err as { type?: string; status?: number; message?: string };
    if (e.type === 'entity.parse.failed') return send(400, `malformed JSON body: ${e.message}`);
    if (e.type === 'entity.too.large') return send(413, 'request body too large');
    if (typeof e.status === 'number' && e.status >= 400 && e.status < 500) return send(e.status, e.message ?? 'bad request');
    logger.error({ err }, 'request failed');
    return send(500, 'internal error');
  };
}
