import type { NextFunction, Request, Response } from 'express';
import { sendJson } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { state } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { sendData } from '../s3/render.js';

/**
 * POST /login {username, password} → {"data":{"token"}}. Missing fields are 400 InvalidArgument;
 * a wrong username or password is 401 with a JSON error (never saying which of the two was wrong).
 * Too many failures from one client (per IP, per username from that IP: deps.loginGuard) answer
 * 429 with Retry-After, before any password check.
 */
export function login(deps: GatewayDeps) {
  return async (req: Request, res: Response, next: NextFunction) => {
    state(res).operation = 'Login';
    state(res).errorFormat = 'json';
    try {
      const body = req.body as { username?: unknown; password?: unknown } | undefined;
      if (!body || typeof body !== 'object' || typeof body.username !== 'string' || typeof body.password !== 'string' || !body.username || !body.password) {
        throw new S3Error('InvalidArgument', 'POST /login expects a JSON body {"username": string, "password": string}.');
      }
      const { username, password } = body as { username: string; password: string };
      const guard = deps.loginGuard;
      const ip = deps.proxies.clientAddress(req);
      const refuse = (retryAfterSeconds: number) => {
        res.setHeader('Retry-After', String(retryAfterSeconds));
        sendJson(res, { error: { code: 'TooManyRequests', message: `Too many failed logins; try again in ${retryAfterSeconds} seconds.` } }, 429);
      };
      const before = await guard.check(ip, username);
      if (!before.allowed) return refuse(before.retryAfterSeconds);
      const outcome = await guard.hashing(ip, async () => {
        // Checked again in the slot: logins that queued together must not all pass one count.
        const verdict = await guard.check(ip, username);
        if (!verdict.allowed) return verdict;
        try {
          const user = await deps.controlPlane.verifyUser(username, password);
          await guard.succeeded(ip, username);
          return user;
        } catch (err) {
          if (err instanceof S3Error && (err.code === 'AccessDenied' || err.code === 'InvalidAccessKeyId' || err.code === 'Unauthorized')) {
            await guard.failed(ip, username);
            return undefined;
          }
          throw err;
        }
      });
      if (outcome === undefined) {
        sendJson(res, { error: { code: 'AccessDenied', message: 'Invalid username or password.' } }, 401);
        return;
      }
      if ('allowed' in outcome) return refuse(outcome.retryAfterSeconds);
      sendData(res, { token: deps.tokens.issue({ sub: outcome.username, ak: outcome.accessKey }), username: outcome.username });
    } catch (err) {
      if (err instanceof S3Error && err.code === 'SlowDown') res.setHeader('Retry-After', '1');
      next(err);
    }
  };
}
