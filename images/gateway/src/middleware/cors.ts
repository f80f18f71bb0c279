import cors from 'cors';
import type { NextFunction, Request, Response } from 'express';
import { state } from '../context.js';

/**
 * Cross-origin access for browser applications: a page on another origin may call the gateway with
 * fetch (log in, upload to a presigned URL, read an object and its ETag). Preflights (OPTIONS) are
 * answered here, before authentication, as S3 and MinIO do; they grant nothing by themselves, since
 * every request still carries its own token or signature. Origins are server-wide
 * (STRATA_CORS_ORIGINS; `*` by default, as MinIO's): per-bucket CORS configuration is not kept.
 */
export function crossOrigin(origins: readonly string[]): ((req: Request, res: Response, next: NextFunction) => void) | undefined {
  if (origins.length === 0) return undefined;
  const handle = cors({
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'],
    // No cookies are involved (auth travels in headers and URLs), so every answer header may be read:
    // ETag, x-amz-request-id, x-amz-checksum-*, x-amz-meta-*...
    exposedHeaders: '*',
    maxAge: 3600,
    optionsSuccessStatus: 200,
  });
  return (req, res, next) => {
    // As S3: no CORS headers for requests without an Origin (command-line clients, SDKs outside browsers).
    if (req.headers.origin === undefined) return next();
    if (req.method === 'OPTIONS') state(res).operation = 'Preflight';
    handle(req, res, next);
  };
}
