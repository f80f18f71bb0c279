import jwt from 'jsonwebtoken';
import passport from 'passport';

export type BearerAuthenticator = passport.Authenticator;
import { ExtractJwt, Strategy as JwtStrategy } from 'passport-jwt';

/** What a Strata bearer token says about its holder. */
export interface TokenClaims {
  sub: string;
  /** The holder's access key, so the gateway can sign presigned URLs on their behalf. */
  ak: string;
}

export interface TokenIssuer {
  issue(claims: TokenClaims): string;
}

/** HS256 tokens with a configurable lifetime (jsonwebtoken's notation: "1h", "15m", or seconds). */
export function tokenIssuer(secret: string, expiresIn: string | number): TokenIssuer {
  const lifetime = /^\d+$/.test(String(expiresIn)) ? Number(expiresIn) : expiresIn;
  return {
    issue: (claims) => jwt.sign(claims, secret, { algorithm: 'HS256', expiresIn: lifetime as jwt.SignOptions['expiresIn'] }),
  };
}

/**
 * A passport instance (not the global one: several gateways may live in one process) with the
 * `jwt` strategy: Bearer token, HS256 only, an expiry required and enforced.
 */
export function bearerPassport(secret: string): BearerAuthenticator {
  const instance = new passport.Authenticator();
  instance.use(
    'jwt',
    new JwtStrategy(
      { jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(), secretOrKey: secret, algorithms: ['HS256'] },
      (payload: Partial<TokenClaims> & { exp?: unknown }, done: (err: unknown, user?: TokenClaims | false, info?: unknown) => void) => {
        if (typeof payload.sub !== 'string' || typeof payload.ak !== 'string') done(null, false, { message: 'token lacks its subject' });
        // Every token this gateway issues expires; one that never does is not ours to honour.
        else if (typeof payload.exp !== 'number') done(null, false, { message: 'token lacks an expiry' });
        else done(null, { sub: payload.sub, ak: payload.ak });
      },
    ),
  );
  return instance;
}
