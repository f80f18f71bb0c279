import { S3Error } from '../../../object-model/src/index.js';
import type { KeyScope } from '../../../object-model/src/index.js';
import {
  ALGORITHM,
  MAX_PRESIGN_SECONDS,
  STREAMING_PAYLOAD,
  STREAMING_PAYLOAD_TRAILER,
  STREAMING_UNSIGNED_TRAILER,
  UNSIGNED_PAYLOAD,
  canonicalPath,
  canonicalQuery,
  canonicalRequest,
  headerText,
  parseAmzDate,
  parseRawQuery,
  safeDecode,
  sign,
  signaturesEqual,
  signingKey,
  stringToSign,
  toAmzDate,
  uriEncode,
  type CanonicalRequestInput,
} from './sigv4.js';
import { keepVerdict, keptVerdict, signedHeaderValues, verdictAnswer, type KeptVerdict } from './presigned-verdicts.js';

/** What SigV4 verification needs from the caller's store of secrets. */
export interface Credential {
  username: string;
  accessKey: string;
  secretKey: string;
  /** A scoped key's limits (`username` is then its parent's): key-scope.ts enforces them. */
  scope?: KeyScope;
}
export type CredentialLookup = (accessKey: string) => Promise<Credential>;

/** How the request body is protected, decided by x-amz-content-sha256. */
export type PayloadMode = { kind: 'unsigned' } | { kind: 'sha256'; hex: string } | { kind: 'chunked'; signed: boolean; trailer: boolean };

export interface SigV4Result {
  credential: Credential;
  payload: PayloadMode;
  /** For chunk signatures: the seed signature, key, scope and date. */
  seedSignature: string;
  key: Buffer;
  scope: string;
  amzDate: string;
}

export interface SigV4Request {
  method: string;
  /** Raw request target as received: path + '?' + query, still percent-encoded. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface VerifyOptions {
  /** The region credential scopes must name (the gateway's STRATA_REGION). */
  region: string;
  now?: Date;
}

/** The clock difference S3 tolerates between a signed request and the server (15 minutes). */
export const MAX_SKEW_MS = 15 * 60 * 1000;
const SERVICE = 's3';

function header(req: SigV4Request, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function isSigV4Header(authorization: string | undefined): boolean {
  return !!authorization && authorization.startsWith(`${ALGORITHM} `);
}

export function isPresignedQuery(rawQuery: string): boolean {
  return rawQuery.includes('X-Amz-Algorithm=') || rawQuery.includes('X-Amz-Credential=');
}

function payloadMode(hash: string | undefined, presigned: boolean): PayloadMode {
  if (presigned || hash === undefined || hash === UNSIGNED_PAYLOAD) {
    if (!presigned && hash === undefined) throw new S3Error('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
    return { kind: 'unsigned' };
  }
  if (hash === STREAMING_PAYLOAD) return { kind: 'chunked', signed: true, trailer: false };
  if (hash === STREAMING_PAYLOAD_TRAILER) return { kind: 'chunked', signed: true, trailer: true };
  if (hash === STREAMING_UNSIGNED_TRAILER) return { kind: 'chunked', signed: false, trailer: true };
  if (/^[0-9a-f]{64}$/.test(hash)) return { kind: 'sha256', hex: hash };
  throw new S3Error('InvalidArgument', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD or a valid sha256 value.');
}

/** `Credential=AK/20130524/us-east-1/s3/aws4_request` → parts, with clear errors. */
export function parseCredential(value: string): ParsedCredential {
  // Requests of one client, or presigned together, name the same credential: read it once.
  if (lastCredential !== undefined && value === lastCredential.value) return lastCredential.parsed;
  const parsed = readCredential(value);
  lastCredential = { value, parsed };
  return parsed;
}

export interface ParsedCredential {
  readonly accessKey: string;
  readonly date: string;
  readonly region: string;
  readonly service: string;
  readonly scope: string;
}

let lastCredential: { value: string; parsed: ParsedCredential } | undefined;

function readCredential(value: string): ParsedCredential {
  const parts = value.split('/');
  if (parts.length < 5 || parts[parts.length - 1] !== 'aws4_request') {
    throw new S3Error(
      'InvalidArgument',
      `Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`,
    );
  }
  // Access keys never contain '/', but be tolerant: the scope is the last four parts.
  const [date, region, service] = parts.slice(-4, -1);
  const accessKey = parts.slice(0, -4).join('/');
  return { accessKey, date, region, service, scope: parts.slice(-4).join('/') };
}

/**
 * The credential scope must be the request's day, this gateway's region and s3, as S3 checks it:
 * AuthorizationHeaderMalformed (header auth) or AuthorizationQueryParametersError (presigned), 400.
 */
function checkScope(cred: ReturnType<typeof parseCredential>, requestDay: string, region: string, presigned: boolean): void {
  if (cred.region !== region) throw scopeError(presigned, `the region '${cred.region}' is wrong; expecting '${region}'`, { Region: region });
  if (cred.service !== SERVICE) throw scopeError(presigned, `incorrect service '${cred.service}'. This endpoint belongs to '${SERVICE}'.`);
  if (cred.date !== requestDay)
    throw scopeError(
      presigned,
      `Invalid credential date '${cred.date}'. Date is not the same as ${presigned ? 'X-Amz-Date' : 'the request date'} (${requestDay}).`,
    );
}

function scopeError(presigned: boolean, problem: string, extra: Record<string, string> = {}): S3Error {
  return presigned
    ? new S3Error('AuthorizationQueryParametersError', `Error parsing the X-Amz-Credential parameter; ${problem}`, extra)
    : new S3Error('AuthorizationHeaderMalformed', `The authorization header is malformed; ${problem}`, extra);
}

/** Headers that change what a request stores or does: x-amz-* and Strata's own x-service-* (x-service-md5). */
const MUST_BE_SIGNED = /^x-(amz|service)-/i;

/**
 * Every x-amz-* and x-service-* header the request carries must be among the signed ones, for header
 * and presigned auth alike: an unsigned one could change what the signer allowed (x-amz-copy-source
 * turns a signed PUT into a copy of any of the signer's objects; x-service-md5 into an instant upload
 * of another of the signer's objects, whatever the body).
 */
export function checkAllAmzHeadersSigned(headers: SigV4Request['headers'], signedHeaders: readonly string[]): void {
  // (Every request passes here: no array of the header names, and none of the unsigned ones unless there are some.)
  let unsigned: string[] | undefined;
  for (const name in headers) if (MUST_BE_SIGNED.test(name) && !signedHeaders.includes(name.toLowerCase())) (unsigned ??= []).push(name);
  if (unsigned !== undefined) {
    throw new S3Error('AccessDenied', 'There were headers present in the request which were not signed', { HeadersNotSigned: unsigned.join(', ') });
  }
}

/** What a kept verdict does not answer for: the moment (not yet valid, expired) and the request's other x-amz-* headers. */
function checkKeptVerdict(req: SigV4Request, verdict: KeptVerdict, now: Date): void {
  checkPresignedWindow(verdict.dateMs, verdict.expiresSeconds, now);
  checkAllAmzHeadersSigned(req.headers, verdict.signedHeaders);
}

/**
 * A presigned request (no Authorization signature) answered at once, without a promise: its URL's verdict is
 * kept and the credential lookup holds the key's credential in memory (`known`). Undefined when either is not
 * so (verifySigV4 then verifies it); throws what verifySigV4 would for the moment and unsigned headers.
 */
export function verifyKeptPresigned(req: SigV4Request, known: (accessKey: string) => Credential | undefined, opts: VerifyOptions): SigV4Result | undefined {
  const verdict = keptVerdict(req, opts.region, header(req, 'x-amz-content-sha256'));
  if (verdict === undefined) return undefined;
  checkKeptVerdict(req, verdict, opts.now ?? new Date());
  const credential = known(verdict.accessKey);
  return credential !== undefined && credential.secretKey === verdict.secretKey ? verdictAnswer(verdict, credential) : undefined;
}

/**
 * Verify a SigV4 request (Authorization header or presigned query). Throws the S3 error a real S3
 * would answer: InvalidAccessKeyId, SignatureDoesNotMatch, RequestTimeTooSkewed, AccessDenied
 * ("Request has expired", unsigned x-amz-* or x-service-* headers), AuthorizationHeaderMalformed /
 * AuthorizationQueryParametersError (credential scope) or InvalidArgument for malformed parameters.
 */
export async function verifySigV4(req: SigV4Request, lookup: CredentialLookup, opts: VerifyOptions): Promise<SigV4Result> {
  const now = opts.now ?? new Date();
  const q = req.url.indexOf('?');
  const rawPath = q < 0 ? req.url : req.url.slice(0, q);
  const rawQuery = q < 0 ? '' : req.url.slice(q + 1);
  const authorization = header(req, 'authorization');
  const presigned = !isSigV4Header(authorization);
  if (presigned) {
    // A URL verified lately, over the same inputs: only what depends on the moment or the rest of the request is checked again.
    const verdict = keptVerdict(req, opts.region, header(req, 'x-amz-content-sha256'));
    if (verdict) {
      checkKeptVerdict(req, verdict, now);
      const credential = await lookup(verdict.accessKey);
      if (credential.secretKey === verdict.secretKey) return verdictAnswer(verdict, credential);
    }
  }
  const { query, signedQuery } = readQuery(rawQuery, presigned);

  let credentialValue: string;
  let signedHeaders: string[];
  let signature: string;
  let amzDate: string;
  let expires: number | undefined;
  if (!presigned) {
    const fields = Object.fromEntries(
      authorization!
        .slice(ALGORITHM.length + 1)
        .split(',')
        .map((f) => f.trim())
        .filter(Boolean)
        .map((f) => {
          const eq = f.indexOf('=');
          return [f.slice(0, eq), f.slice(eq + 1)];
        }),
    ) as Record<string, string | undefined>;
    if (!fields.Credential || !fields.SignedHeaders || !fields.Signature) {
      throw new S3Error('InvalidArgument', 'The authorization header is malformed; it must contain Credential, SignedHeaders and Signature.');
    }
    credentialValue = fields.Credential;
    signedHeaders = fields.SignedHeaders.split(';');
    signature = fields.Signature;
    amzDate = header(req, 'x-amz-date') ?? '';
    if (!amzDate) {
      const d = header(req, 'date');
      amzDate = d && !Number.isNaN(Date.parse(d)) ? d : '';
    }
  } else {
    // S3's code for every malformed query-string authentication parameter.
    if (param(query, 'X-Amz-Algorithm') !== ALGORITHM)
      throw new S3Error('AuthorizationQueryParametersError', 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
    const c = param(query, 'X-Amz-Credential');
    const sh = param(query, 'X-Amz-SignedHeaders');
    const sig = param(query, 'X-Amz-Signature');
    const d = param(query, 'X-Amz-Date');
    const e = param(query, 'X-Amz-Expires');
    if (!c || !sh || !sig || !d || !e) {
      throw new S3Error(
        'AuthorizationQueryParametersError',
        'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
      );
    }
    credentialValue = c;
    signedHeaders = sh.split(';');
    signature = sig;
    amzDate = d;
    expires = Number(e);
    if (/^-\d+$/.test(e)) throw new S3Error('AuthorizationQueryParametersError', 'X-Amz-Expires must be non-negative');
    if (!/^\d+$/.test(e)) throw new S3Error('AuthorizationQueryParametersError', 'X-Amz-Expires should be a number');
    if (expires > MAX_PRESIGN_SECONDS)
      throw new S3Error('AuthorizationQueryParametersError', 'X-Amz-Expires must be less than a week (in seconds) that is 604800');
  }

  const cred = parseCredential(credentialValue);
  const date = parseAmzDate(amzDate) ?? (Date.parse(amzDate) ? new Date(amzDate) : undefined);
  if (!date) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  if (!signedHeaders.includes('host')) throw new S3Error('AccessDenied', 'The host header must be signed.');
  checkScope(cred, toAmzDate(date).slice(0, 8), opts.region, presigned);

  if (presigned) {
    checkPresignedWindow(date.getTime(), expires!, now);
  } else if (Math.abs(now.getTime() - date.getTime()) > MAX_SKEW_MS) {
    throw new S3Error('RequestTimeTooSkewed', undefined, { RequestTime: amzDate, ServerTime: now.toISOString() });
  }
  checkAllAmzHeadersSigned(req.headers, signedHeaders);

  const credential = await lookup(cred.accessKey);
  const payload = payloadMode(header(req, 'x-amz-content-sha256'), presigned);
  const payloadHash = presigned ? (header(req, 'x-amz-content-sha256') ?? UNSIGNED_PAYLOAD) : header(req, 'x-amz-content-sha256')!;
  const key = signingKey(credential.secretKey, cred.date, cred.region, cred.service);
  const amzDateForSigning = presigned ? amzDate : (header(req, 'x-amz-date') ?? amzDate);

  // The signed headers as the bytes the client signed (UTF-8 metadata, for one), not as Node decoded them.
  const signedValues = Object.fromEntries(
    signedHeaders.map((name) => {
      const v = req.headers[name];
      return [name, Array.isArray(v) ? v.map(headerText) : v === undefined ? undefined : headerText(v)];
    }),
  );
  // Clients encode the path the same way in almost all cases; a few send it raw or doubly encoded,
  // so try the canonical form first and then the path exactly as it arrived.
  const canonical = canonicalPath(rawPath);
  const input: CanonicalRequestInput = { method: req.method, path: canonical, query: signedQuery, headers: signedValues, signedHeaders, payloadHash };
  const toSign = { key, amzDate: amzDateForSigning, scope: cred.scope, signature };
  const verified =
    signs(toSign, input) ||
    (rawPath !== canonical && signs(toSign, { ...input, path: rawPath })) ||
    (rawPath.startsWith('/') && uriEncode(rawPath, false) !== canonical && signs(toSign, { ...input, path: uriEncode(rawPath, false) }));
  if (!verified) throw new S3Error('SignatureDoesNotMatch', undefined, { AWSAccessKeyId: cred.accessKey });
  const result = { payload, seedSignature: signature, key, scope: cred.scope, amzDate: amzDateForSigning };
  const values = presigned ? signedHeaderValues(req, signedHeaders) : undefined;
  if (values) {
    keepVerdict(req.url, {
      method: req.method,
      region: opts.region,
      signedHeaders,
      values,
      payloadHeader: header(req, 'x-amz-content-sha256'),
      accessKey: cred.accessKey,
      secretKey: credential.secretKey,
      dateMs: date.getTime(),
      expiresSeconds: expires!,
      result,
    });
  }
  return { ...result, credential };
}

/** A presigned URL is good from its X-Amz-Date (less the clock skew S3 allows) until X-Amz-Expires seconds after it. */
function checkPresignedWindow(dateMs: number, expiresSeconds: number, now: Date): void {
  if (dateMs - now.getTime() > MAX_SKEW_MS) throw new S3Error('AccessDenied', 'Request is not valid yet');
  if (now.getTime() > dateMs + expiresSeconds * 1000)
    throw new S3Error('AccessDenied', 'Request has expired', { Expires: new Date(dateMs + expiresSeconds * 1000).toISOString() });
}

/** Whether `signature` is the request's, signed over `input`. (A function, not a closure per request.) */
function signs(s: { key: Buffer; amzDate: string; scope: string; signature: string }, input: CanonicalRequestInput): boolean {
  return signaturesEqual(sign(s.key, stringToSign(s.amzDate, s.scope, canonicalRequest(input))), s.signature);
}

/** The first value of the query parameter `name`. */
function param(query: Array<[string, string]>, name: string): string | undefined {
  for (const [k, v] of query) if (k === name) return v;
  return undefined;
}

/** A presigned request signs every pair but X-Amz-Signature; one signed in its header, every pair. */
function signedPairs(pairs: Array<[string, string]>, presigned: boolean): Array<[string, string]> {
  return presigned ? pairs.filter(([k]) => k !== 'X-Amz-Signature') : pairs;
}

/** A query as verification reads it: its pairs (decoded), and the canonical text of those it signs. */
interface ReadQuery {
  query: Array<[string, string]>;
  signedQuery: string;
}

/**
 * Queries read lately, by their text without the presigned signature: a presigned URL fetched again,
 * or URLs presigned together (one date, expiry and credential, different keys), parse once. Only the
 * text is remembered here, never whether a signature matched (that is presigned-verdicts.ts's, keyed by
 * every input of the signature).
 */
const readQueries = new Map<string, Omit<ReadQuery, 'query'> & { pairs: Array<[string, string]> }>();
const MAX_READ_QUERIES = 256;
const SIGNATURE_PAIR = 'X-Amz-Signature=';

/**
 * The query's pairs and the canonical text of its signed ones: every pair but X-Amz-Signature for a
 * presigned request, every pair for one signed in its header.
 */
function readQuery(rawQuery: string, presigned: boolean): ReadQuery {
  // The text without the one `X-Amz-Signature=...` pair, and the pair's value (a presigned URL's usual form).
  const at = presigned ? rawQuery.indexOf(SIGNATURE_PAIR) : -1;
  if (at < 0 || (at > 0 && rawQuery[at - 1] !== '&')) {
    const query = parseRawQuery(rawQuery);
    return { query, signedQuery: canonicalQuery(signedPairs(query, presigned)) };
  }
  const end = rawQuery.indexOf('&', at);
  const rawSignature = rawQuery.slice(at + SIGNATURE_PAIR.length, end < 0 ? rawQuery.length : end);
  const rest = end < 0 ? rawQuery.slice(0, Math.max(0, at - 1)) : rawQuery.slice(0, at) + rawQuery.slice(end + 1);
  let read = readQueries.get(rest);
  if (!read) {
    const pairs = parseRawQuery(rest);
    // Another pair named X-Amz-Signature (encoded, or twice): read the whole text as it is.
    if (pairs.some(([k]) => k === 'X-Amz-Signature')) {
      const query = parseRawQuery(rawQuery);
      return { query, signedQuery: canonicalQuery(signedPairs(query, presigned)) };
    }
    read = { pairs, signedQuery: canonicalQuery(pairs) };
    if (readQueries.size >= MAX_READ_QUERIES) readQueries.clear();
    readQueries.set(rest, read);
  }
  return { query: [...read.pairs, ['X-Amz-Signature', safeDecode(rawSignature)]], signedQuery: read.signedQuery };
}
