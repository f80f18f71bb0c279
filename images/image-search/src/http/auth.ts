// Who is asking. A request carries nothing (anonymous), or a token in `Authorization: Bearer` (or
// `X-API-Key`): the configured IMAGE_SEARCH_API_KEY (the index's admin), or an HS256 token signed with
// the STRATA_JWT_SECRET the gateway has (it must carry an expiry, which is enforced). A token's `sub`
// is a gateway user; the users named in IMAGE_SEARCH_ADMIN_USERS, and tokens carrying the role
// `image-search-admin` (the operator mints those for its Jobs; the gateway never issues it), are admins.
// Only admins change the index; what a caller may read is decided by ImageAccess (image-access.ts).
// A token that is presented but not valid is refused (401), never taken as anonymous.
import { timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import jwt from 'jsonwebtoken';

export interface AuthSettings {
  apiKey?: string;
  jwtSecret?: string;
  /** Gateway users whose tokens may change the index. */
  adminUsers?: readonly string[];
}

/** The role claim that makes a token an admin's (signed with the JWT secret, e.g. by the operator). */
export const ADMIN_ROLE = 'image-search-admin';

export type Caller = { kind: 'admin'; subject: string } | { kind: 'user'; username: string } | { kind: 'anonymous' };

export type Decision = { ok: true; subject: string } | { ok: false; status: 401 | 403; message: string };

/** Refused: answered 401 (no or a bad token) or 403 (the caller may not). */
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

const CALLERS = new WeakMap<Request, Caller>();

export class WriteAuthorizer {
  constructor(private readonly settings: AuthSettings) {}

  /** What GET /api/status tells the page: which tokens are taken for changes. */
  describe(): { writes: 'token'; accepts: string[] } {
    const { apiKey, jwtSecret, adminUsers = [] } = this.settings;
    const accepts = [
      ...(apiKey ? ['IMAGE_SEARCH_API_KEY'] : []),
      ...(jwtSecret ? [`gateway token of an admin user (IMAGE_SEARCH_ADMIN_USERS: ${adminUsers.length})`] : []),
    ];
    return { writes: 'token', accepts };
  }

  /** The caller of a request (remembered per request); throws UnauthorizedError(401) for a token that is not valid. */
  caller(req: Request): Caller {
    const known = CALLERS.get(req);
    if (known) return known;
    const caller = this.identify(req);
    CALLERS.set(req, caller);
    return caller;
  }

  private identify(req: Request): Caller {
    const { apiKey, jwtSecret, adminUsers = [] } = this.settings;
    const token = tokenOf(req);
    if (!token) return { kind: 'anonymous' };
    if (apiKey && sameSecret(token, apiKey)) return { kind: 'admin', subject: 'api-key' };
    if (jwtSecret) {
      try {
        const claims = jwt.verify(token, jwtSecret, { algorithms: ['HS256'] });
        // As the gateway: a token that never expires is not one it issued.
        if (typeof claims === 'object' && typeof claims.sub === 'string' && claims.sub && typeof claims.exp === 'number') {
          if (claims.role === ADMIN_ROLE || adminUsers.includes(claims.sub)) return { kind: 'admin', subject: claims.sub };
          return { kind: 'user', username: claims.sub };
        }
      } catch (err) {
        if (err instanceof jwt.TokenExpiredError) throw new UnauthorizedError(401, 'the token has expired: log in again');
      }
    }
    throw new UnauthorizedError(401, 'the token is not valid here');
  }

  /** Whether the request may change the index: only an admin may. */
  decide(req: Request): Decision {
    const { apiKey, jwtSecret } = this.settings;
    if (!apiKey && !jwtSecret) {
      return { ok: false, status: 403, message: 'changing the index needs a token, and none is configured: set IMAGE_SEARCH_API_KEY or STRATA_JWT_SECRET' };
    }
    let caller: Caller;
    try {
      caller = this.caller(req);
    } catch (err) {
      if (err instanceof UnauthorizedError) return { ok: false, status: err.status, message: err.message };
      throw err;
    }
    if (caller.kind === 'admin') return { ok: true, subject: caller.subject };
    if (caller.kind === 'user') {
      return {
        ok: false,
        status: 403,
        message: `${caller.username} may not change the index: it takes IMAGE_SEARCH_API_KEY or an admin user (IMAGE_SEARCH_ADMIN_USERS)`,
      };
    }
    return {
      ok: false,
      status: 401,
      message: 'changing the index needs a token: send Authorization: Bearer <IMAGE_SEARCH_API_KEY or a gateway token of an admin user>',
    };
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
