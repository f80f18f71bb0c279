import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '../../service-kit/src/index.js';

export interface ErrorDetail {
  field: string;
  message: string;
}

/** An error meant for the client: rendered as `{error: {code, message, details?, hint?}}` with its status. */
export class HttpError extends Error {
  /** What the person can do about it (shown under the message). */
  hint?: string;

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
    this.name = 'HttpError';
  }

  toJSON(): { error: { code: string; message: string; details?: ErrorDetail[]; hint?: string } } {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}), ...(this.hint ? { hint: this.hint } : {}) } };
  }
}

/** JSON 404 for API paths that match no route (the page's static files are served before this). */
export const apiNotFound: RequestHandler = (req, _res, next) => {
  next(new HttpError(404, 'not_found', `no such endpoint: ${req.method} ${req.path}`));
};

/**
 * Last middleware: every failure becomes a JSON error body. Body-parser errors keep their status
 * (400 malformed JSON, 413 too large, 415 bad charset); anything unexpected is a logged 500.
 */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const httpError = toHttpError(err);
    if (httpError.status >= 500 && !(err instanceof HttpError)) logger.error({ err, path: req.path }, 'unhandled error');
    res.status(httpError.status).json(httpError.toJSON());
  };
}

function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const e = err as { status?: number; type?: string; limit?: number };
  if (e?.type === 'entity.too.large') {
    const limit = e.limit === undefined ? '' : ` (${e.limit} bytes)`;
    return new HttpError(413, 'payload_too_large', `request body is larger than the limit${limit}`);
  }
  if (e?.type === 'entity.parse.failed') return new HttpError(400, 'invalid_json', 'request body is not valid JSON');
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
    return new HttpError(e.status, 'bad_request', (err as Error).message);
  }
  return new HttpError(500, 'internal_error', 'internal error; see the server log');
}
