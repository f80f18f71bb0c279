// Queries in flight (each encodes a text or an uploaded image, and may hold an upload buffer), shared
// fairly between callers, so that one caller's flood leaves room for the others (service kit's FairPool).
import type { NextFunction, Request, Response } from 'express';
import { FairPool, type ShareRefusal } from '../../../service-kit/src/index.js';
import type { WriteAuthorizer } from './auth.js';

/** Refused a query slot: answered 429 with Retry-After (errors.ts). */
export class QueryBusyError extends Error {
  constructor(readonly reason: ShareRefusal) {
    super(
      reason === 'pool-full'
        ? 'image search is at capacity (queries in flight); retry shortly'
        : 'you have your share of the queries in flight (other callers are searching too); retry shortly',
    );
  }
}

/**
 * Middleware that holds one of `slots` queries in flight, at most `perCaller` of them (and no more
 * than its share while others want some) for one caller, from before the body is read until the
 * answer ends or the client leaves. A caller is a gateway user or an admin; an anonymous caller is
 * its address (`clientAddress`: behind a trusted ingress the client's, else every anonymous caller is one).
 */
export function querySlots(
  auth: WriteAuthorizer,
  slots: number,
  perCaller: number,
  clientAddress: (req: Request) => string,
): (req: Request, res: Response, next: NextFunction) => void {
  const pool = new FairPool(slots, perCaller);
  return (req, res, next) => {
    const caller = auth.caller(req);
    const name = caller.kind === 'user' ? `user:${caller.username}` : caller.kind === 'admin' ? `admin:${caller.subject}` : `address:${clientAddress(req)}`;
    const taken = pool.tryTake(name);
    if (typeof taken === 'string') throw new QueryBusyError(taken);
    res.once('close', taken);
    next();
  };
}
