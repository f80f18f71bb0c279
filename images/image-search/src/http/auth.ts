// Who may change the index. Reads (search, status, tools that only read) are open; routes that change
// state (index add/remove/merge/rebuild, the add_images tool) need a token in `Authorization: Bearer`
// (or `X-API-Key`): the configured IMAGE_SEARCH_API_KEY, or a token the gateway issued at POST /login
// (HS256, signed with the STRATA_JWT_SECRET the gateway has; it must carry an expiry, which is enforced). With neither
// configured, nothing may change the index over HTTP.
import { timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import jwt from 'jsonwebtoken';

export interface AuthSettings {
  apiKey?: string;
  jwtSecret?: string;
}

export type Decision = { ok: true; subject: string } | { ok: false; status: 401 | 403; message: string };

/** Refused: answered 401 (no or a bad token) or 403 (no way to authorise is configured). */
export class UnauthorizedError extends Error {
  constructor(
    readonly status: 401 | 403,
    message: string,
  ) {
    super(message);
  }
}

function tokenOf(req: Request): string | undefined {
  const header = req.headers.authorization;
  const bearer = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
  const key = req.headers['x-api-key'];
  return bearer ?? (typeof key === 'string' && key ? key : undefined);
}

const sameSecret = (a: string, b: string) => {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
};

export class WriteAuthorizer {
  constructor(private readonly settings: AuthSettings) {}

  /** What GET /api/status tells the page: which tokens are taken. */
  describe(): { writes: 'token'; accepts: string[] } {
    const accepts = [...(this.settings.apiKey ? ['IMAGE_SEARCH_API_KEY'] : []), ...(this.settings.jwtSecret ? ['gateway token (POST /login)'] : [])];
    return { writes: 'token', accepts };
  }

  decide(req: Request): Decision {
    const { apiKey, jwtSecret } = this.settings;
    if (!apiKey && !jwtSecret) {
      return { ok: false, status: 403, message: 'changing the index needs a token, and none is configured: set IMAGE_SEARCH_API_KEY or STRATA_JWT_SECRET' };
    }
    const token = tokenOf(req);
    if (!token)
      return {
        ok: false,
        status: 401,
        message: 'changing the index needs a token: send Authorization: Bearer <IMAGE_SEARCH_API_KEY or a gateway token from POST /login>',
      };
    if (apiKey && sameSecret(token, apiKey)) return { ok: true, subject: 'api-key' };
    if (jwtSecret) {
      try {
        const claims = jwt.verify(token, jwtSecret, { algorithms: ['HS256'] });
        // As the gateway: a token that never expires is not one it issued.
        if (typeof claims === 'object' && typeof claims.sub === 'string' && typeof claims.exp === 'number') return { ok: true, subject: claims.sub };
      } catch (err) {
        if (err instanceof jwt.TokenExpiredError) return { ok: false, status: 401, message: 'the token has expired: log in again' };
      }
    }
    return { ok: false, status: 401, message: 'the token is not valid here' };
  }

  /** Throws UnauthorizedError unless the request may change state. */
  require(req: Request): void {
    const decision = this.decide(req);
    if (!decision.ok) throw new UnauthorizedError(decision.status, decision.message);
  }

  /** Express middleware of require(). */
  readonly guard = (req: Request, _res: Response, next: NextFunction): void => {
    try {
      this.require(req);
      next();
    } catch (err) {
      next(err);
    }
  };
}
