import type { NextFunction, Request, Response } from 'express';
import { S3Error } from '../../../service-kit/src/index.js';
import { state } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { sendData } from '../s3/render.js';

/**
 * POST /login {username, password} → {"data":{"token"}}. Missing fields are 400 InvalidArgument;
 * a wrong username or password is 401 with a JSON error (never saying which of the two was wrong).
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
      let user: { username: string; accessKey: string };
      try {
        user = await deps.controlPlane.verifyUser(body.username, body.password);
      } catch (err) {
        if (err instanceof S3Error && (err.code === 'AccessDenied' || err.code === 'InvalidAccessKeyId' || err.code === 'Unauthorized')) {
          res.status(401).json({ error: { code: 'AccessDenied', message: 'Invalid username or password.' } });
          return;
        }
        throw err;
      }
      sendData(res, { token: deps.tokens.issue({ sub: user.username, ak: user.accessKey }), username: user.username });
    } catch (err) {
      next(err);
    }
  };
}
