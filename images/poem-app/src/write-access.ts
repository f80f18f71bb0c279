import { timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { isLoopback } from '../../service-kit/src/index.js';
import { HttpError } from './http-errors.js';

/**
 * Who may change the poem history (save, delete), following the platform's rule for exposed
 * services: with POEM_APP_API_KEY set, a request needs `Authorization: Bearer <key>`; without one,
 * writes are open on a loopback address only, and refused (403) on any other, so that a poem app
 * reachable from the network never lets anyone rewrite its history. Reading and generating stay open.
 */
export interface WriteAccess {
  mode: 'key' | 'open' | 'disabled';
  key?: string;
}

export function writeAccess(host: string | undefined, key: string | undefined): WriteAccess {
  if (key) return { mode: 'key', key };
  return isLoopback(host) ? { mode: 'open' } : { mode: 'disabled' };
}

export function requireWriteAccess(access: WriteAccess): RequestHandler {
  const wanted = access.key === undefined ? undefined : Buffer.from(access.key);
  return (req, res, next) => {
    if (access.mode === 'open') return next();
    if (access.mode === 'disabled') {
      throw new HttpError(403, 'writes_disabled', 'changing the poem history is turned off: this server listens beyond localhost and has no POEM_APP_API_KEY');
    }
    const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    const given = match ? Buffer.from(match[1]!.trim()) : undefined;
    if (!given || !wanted || given.length !== wanted.length || !timingSafeEqual(given, wanted)) {
      res.setHeader('WWW-Authenticate', 'Bearer');
      const error = new HttpError(401, 'unauthorized', 'changing the poem history needs the access key (POEM_APP_API_KEY)');
      error.hint = 'Enter the access key under "Access key" in Recent works.';
      throw error;
    }
    next();
  };
}
