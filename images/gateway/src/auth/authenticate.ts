import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { acceptBody, rawTarget, state, type Caller } from '../context.js';
import { sentTarget } from '../s3/virtual-host.js';
import type { BearerAuthenticator, TokenClaims } from './jwt.js';
import { isPresignedQuery, isSigV4Header, verifyKeptPresigned, verifySigV4, type Credential, type CredentialLookup, type SigV4Result } from './sigv4-verify.js';
import { isSigV2Header, isSigV2Query, signatureV2Off, verifySigV2 } from './sigv2.js';

export interface AuthDeps {
  passport: BearerAuthenticator;
  /** With `known`, the credentials it holds in memory are read without a promise (a hot presigned URL's). */
  credentials: CredentialLookup & { known?(accessKey: string): Credential | undefined };
  rootUser: string;
  /** The region SigV4 credential scopes must name. */
  region: string;
  /** Whether AWS Signature Version 2 is accepted (STRATA_SIGV2); when not, it is 403 AccessDenied. */
  signatureV2: boolean;
}

/** S3's answer to a request that carries two signatures (which one would hold?). */
function twoMechanisms(authorization: string | undefined): S3Error {
  return new S3Error(
    'InvalidArgument',
    'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    authorization === undefined ? { ArgumentName: 'Signature' } : { ArgumentName: 'Authorization', ArgumentValue: authorization.split(' ', 1)[0]! },
  );
}

/**
 * What an anonymous request (no signature, no token) may ask: what an ACL can open to everyone — reads
 * (an object granted to AllUsers and its attributes, a bucket listing and its uploads' listing, their ACLs)
 * and, where a bucket grants AllUsers WRITE (`public-read-write`), writing and deleting its objects, multipart
 * uploads included (ListParts and AbortMultipartUpload of an upload begun anonymously), and copying into it
 * an object granted to AllUsers READ. Their
 * handlers decide by the ACL; anything else anonymous is AccessDenied here, before any lookup. (A form
 * upload without a policy is anonymous too: PostObject authenticates itself.)
 */
const ANONYMOUS_OPERATIONS = new Set([
  'GetObject',
  'HeadObject',
  'GetObjectAttributes',
  'ListObjects',
  'ListObjectsV2',
  'ListMultipartUploads',
  'GetObjectAcl',
  'GetBucketAcl',
  'PutObject',
  'DeleteObject',
  'DeleteObjects',
  'CopyObject',
  'CreateMultipartUpload',
  'UploadPart',
  'CompleteMultipartUpload',
  'AbortMultipartUpload',
  'ListParts',
]);

/** Whether an anonymous request for `operation` goes on to its handler (which decides by the ACL). */
export function anonymousMayAsk(operation: string): boolean {
  return ANONYMOUS_OPERATIONS.has(operation);
}

/**
 * Establishes the caller: `Authorization: Bearer <jwt>` through passport-jwt, AWS SigV4 or (unless
 * turned off) SigV2, each as a header or a presigned query. Anonymous requests go on without a caller only for ANONYMOUS_OPERATIONS.
 */
export function authenticate(deps: AuthDeps) {
  // The caller of each SigV4 answer given lately: a kept presigned verdict answers the same object to every
  // request of its URL (verdictAnswer), and those requests share one Caller instead of one each.
  const sigv4Callers = new WeakMap<SigV4Result, Caller>();
  const sigv4Caller = (result: SigV4Result, via: 'sigv4' | 'presigned'): Caller => {
    // (A header-signed request's answer is its own: no entry made for it.)
    const known = via === 'presigned' ? sigv4Callers.get(result) : undefined;
    if (known !== undefined) return known;
    const caller: Caller = { ...identity(result.credential, deps.rootUser), via, sigv4: result };
    if (via === 'presigned') sigv4Callers.set(result, caller);
    return caller;
  };
  const known = deps.credentials.known;
  /**
   * The caller of a presigned SigV4 request whose URL's verdict is kept and whose key's credential is in memory,
   * without a promise; undefined for every other request (the full path below decides those, refusals included).
   */
  const keptPresignedCaller = (req: http.IncomingMessage, res: http.ServerResponse): Caller | undefined => {
    if (known === undefined || state(res).authenticatesItself) return undefined;
    const authorization = req.headers.authorization;
    if (authorization !== undefined && !authorization.startsWith('Bearer ')) return undefined;
    const query = rawTarget(req).query;
    if (!isPresignedQuery(query) || isSigV2Query(query)) return undefined;
    const result = verifyKeptPresigned({ method: req.method ?? '', url: sentTarget(req), headers: req.headers }, known, { region: deps.region });
    return result === undefined ? undefined : sigv4Caller(result, 'presigned');
  };
  const fullPath = async (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => {
    if (state(res).authenticatesItself) {
      // Its signature is in the body (a form's policy): the body is needed to authenticate.
      acceptBody(res);
      return next();
    }
    const authorization = req.headers.authorization;
    try {
      const query = rawTarget(req).query;
      const presigned = isPresignedQuery(query);
      const presignedV2 = isSigV2Query(query);
      // Two signatures are refused, as S3 does. A presigned URL does win over a Bearer header: fetch
      // keeps Authorization when it follows our same-origin 302 to a presigned URL, and answering
      // with another redirect would loop.
      if ((presigned || presignedV2) && authorization !== undefined && !authorization.startsWith('Bearer ')) throw twoMechanisms(authorization);
      if (presigned && presignedV2) throw twoMechanisms(undefined);
      if (presigned || isSigV4Header(authorization)) {
        const result = await verifySigV4({ method: req.method ?? '', url: sentTarget(req), headers: req.headers }, deps.credentials, { region: deps.region });
        state(res).caller = sigv4Caller(result, isSigV4Header(authorization) ? 'sigv4' : 'presigned');
      } else if (presignedV2 || isSigV2Header(authorization)) {
        if (!deps.signatureV2) throw signatureV2Off();
        // SigV2 signs the path-style resource (/bucket/key) whatever the host: the target after any virtual-host rewrite.
        const { path, query: rawQuery } = rawTarget(req);
        const url = rawQuery ? `${path}?${rawQuery}` : path;
        // Repeated x-amz-* headers are signed joined by ',' (Node would join them with ', ').
        const credential = await verifySigV2({ method: req.method ?? '', url, headers: req.headersDistinct }, deps.credentials);
        state(res).caller = { ...identity(credential, deps.rootUser), via: presignedV2 ? 'presigned-v2' : 'sigv2' };
      } else if (authorization?.startsWith('Bearer ')) {
        const holder = await holderOf(await bearer(deps.passport, req, res), deps.credentials);
        state(res).caller = { ...identity(holder, deps.rootUser), via: 'bearer' };
      } else if (authorization !== undefined || !anonymousMayAsk(state(res).operation)) {
        throw new S3Error('AccessDenied', 'Anonymous access is not allowed: send a Bearer token or an AWS signature.');
      }
      // An anonymous body is asked for by its handler once the ACL allowed the request (objectBody).
      if (state(res).caller) acceptBody(res);
      next();
    } catch (err) {
      next(err);
    }
  };
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): Promise<void> | void => {
    let caller: Caller | undefined;
    try {
      caller = keptPresignedCaller(req, res);
    } catch (err) {
      next(err);
      return;
    }
    if (caller === undefined) return fullPath(req, res, next);
    state(res).caller = caller;
    acceptBody(res);
    next();
  };
}

/**
 * Who signed: the key's user, with the key's scope when it is a scoped key. A scoped key of the root is
 * not the root (it administers nothing).
 */
export function identity(credential: Credential, rootUser: string): Omit<Caller, 'via'> {
  return {
    username: credential.username,
    accessKey: credential.accessKey,
    isRoot: credential.username === rootUser && credential.scope === undefined,
    ...(credential.scope ? { scope: credential.scope } : {}),
  };
}

/**
 * A token's holder must still be a user with the access key it names: a deleted user's (or a rotated
 * key's) tokens stop working once the credentials cache forgets the key. A token naming a scoped key
 * carries that key's scope.
 */
async function holderOf(claims: TokenClaims, credentials: CredentialLookup): Promise<Credential> {
  let holder: Credential;
  try {
    holder = await credentials(claims.ak);
  } catch (err) {
    if (err instanceof S3Error && err.code === 'InvalidAccessKeyId') throw new S3Error('AccessDenied', 'The bearer token is invalid.');
    throw err;
  }
  if (holder.username !== claims.sub) throw new S3Error('AccessDenied', 'The bearer token is invalid.');
  return holder;
}

function bearer(passport: BearerAuthenticator, req: http.IncomingMessage, res: http.ServerResponse): Promise<TokenClaims> {
  return new Promise((resolve, reject) => {
    const run = passport.authenticate('jwt', { session: false }, (err: unknown, user: TokenClaims | false, info: unknown) => {
      if (err) return reject(err);
      if (user) return resolve(user);
      const name = (info as { name?: string } | undefined)?.name;
      if (name === 'TokenExpiredError') return reject(new S3Error('ExpiredToken', 'The provided token has expired.'));
      reject(new S3Error('AccessDenied', 'The bearer token is invalid.'));
    }) as (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => void;
    run(req, res, (e?: unknown) => reject(e ?? new S3Error('AccessDenied')));
  });
}
