import { createHmac } from 'node:crypto';
import { S3Error } from '../../../object-model/src/index.js';
import { checkAllAmzHeadersSigned, MAX_SKEW_MS, type Credential, type CredentialLookup, type SigV4Request } from './sigv4-verify.js';
import { canonicalPath, headerText, parseAmzDate, parseRawQuery, safeDecode, signaturesEqual } from './sigv4.js';

/**
 * AWS Signature Version 2 as S3 checks it ("Signing and authenticating REST requests"): a base64
 * HMAC-SHA1 over the method, Content-MD5, Content-Type, the date, the x-amz-* headers and the
 * canonicalized resource, sent as `Authorization: AWS <AccessKeyId>:<Signature>` or in the query
 * (`AWSAccessKeyId`, `Expires`, `Signature`). It protects no body: Content-MD5, when sent, does.
 */

/**
 * The query parameters that are part of the canonicalized resource: S3's documented subresources and
 * response-* overrides, as the AWS SDKs (botocore's HmacV1Auth) sign them; every other parameter is not signed.
 */
const SIGNED_SUBRESOURCES = new Set([
  'accelerate',
  'acl',
  'analytics',
  'cors',
  'delete',
  'inventory',
  'lifecycle',
  'location',
  'logging',
  'metrics',
  'notification',
  'object-lock',
  'partNumber',
  'policy',
  'replication',
  'requestPayment',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'response-content-language',
  'response-content-type',
  'response-expires',
  'restore',
  'select',
  'select-type',
  'storageClass',
  'tagging',
  'torrent',
  'uploadId',
  'uploads',
  'versionId',
  'versioning',
  'versions',
  'website',
]);

const QUERY_PARAMETERS = ['AWSAccessKeyId', 'Expires', 'Signature'] as const;

/** What a gateway with STRATA_SIGV2=false answers every SigV2 request (header, query or form). */
export function signatureV2Off(): S3Error {
  return new S3Error(
    'AccessDenied',
    'AWS Signature Version 2 is turned off on this server (STRATA_SIGV2=false); sign the request with AWS Signature Version 4.',
  );
}

export function isSigV2Header(authorization: string | undefined): boolean {
  return !!authorization && authorization.startsWith('AWS ');
}

/** A SigV2 presigned query names AWSAccessKeyId or Signature (exactly: X-Amz-Signature is SigV4's). */
export function isSigV2Query(rawQuery: string): boolean {
  if (!rawQuery.includes('Signature=') && !rawQuery.includes('AWSAccessKeyId')) return false;
  // The names only (a SigV4 URL's X-Amz-Signature= gets here): values are not decoded, and a name is cut out
  // of the text only when it has escapes to decode.
  for (let start = 0; start <= rawQuery.length; ) {
    const amp = rawQuery.indexOf('&', start);
    const end = amp < 0 ? rawQuery.length : amp;
    const eq = rawQuery.indexOf('=', start);
    const nameEnd = eq < 0 || eq > end ? end : eq;
    if (isSigV2Name(rawQuery, start, nameEnd)) return true;
    start = end + 1;
  }
  return false;
}

/** Whether rawQuery[start, end) is AWSAccessKeyId or Signature, escapes decoded. */
function isSigV2Name(rawQuery: string, start: number, end: number): boolean {
  const length = end - start;
  if (length === 9 || length === 14) {
    const name = rawQuery.startsWith('Signature', start) ? 'Signature' : rawQuery.startsWith('AWSAccessKeyId', start) ? 'AWSAccessKeyId' : '';
    if (name.length === length) return true;
  }
  const percent = rawQuery.indexOf('%', start);
  if (percent < 0 || percent >= end) return false;
  const name = safeDecode(rawQuery.slice(start, end));
  return name === 'AWSAccessKeyId' || name === 'Signature';
}

/** base64(HMAC-SHA1(secret, text)): the signature of a request's string to sign or of a form's policy. */
export function signV2(secret: string, text: string): string {
  return createHmac('sha1', secret).update(text, 'utf8').digest('base64');
}

function headerValue(headers: SigV4Request['headers'], name: string): string {
  const v = headers[name];
  return headerText((Array.isArray(v) ? v.join(',') : (v ?? '')).trim());
}

/** Every x-amz-* header as `name:value\n`, names lower case and sorted, folded whitespace as one space. */
function canonicalAmzHeaders(headers: SigV4Request['headers']): string {
  return Object.keys(headers)
    .map((name) => name.toLowerCase())
    .filter((name) => name.startsWith('x-amz-'))
    .sort()
    .map((name) => `${name}:${headerValue(headers, name).replace(/\s*\r?\n\s*/g, ' ')}\n`)
    .join('');
}

/**
 * The canonicalized resource's subresources: `?name[=value]&...`, sorted by name. `decoded`: values as
 * S3 documents them (not encoded); otherwise exactly as sent (what s3cmd signs).
 */
function signedSubresources(rawQuery: string, decoded: boolean): string {
  const pairs = rawQuery
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return { pair, name: safeDecode(eq < 0 ? pair : pair.slice(0, eq)), value: eq < 0 ? '' : safeDecode(pair.slice(eq + 1)) };
    })
    .filter(({ name }) => SIGNED_SUBRESOURCES.has(name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(({ pair, name, value }) => (!decoded ? pair : value ? `${name}=${value}` : name));
  return pairs.length > 0 ? `?${pairs.join('&')}` : '';
}

export interface StringToSignV2Input {
  method: string;
  headers: SigV4Request['headers'];
  /** The Date header's value, '' when x-amz-date is sent, or a presigned URL's Expires. */
  date: string;
  /** The canonicalized resource: `/bucket/key?subresources` (path style, whatever the host). */
  resource: string;
}

export function stringToSignV2(input: StringToSignV2Input): string {
  const { headers } = input;
  return [
    input.method,
    headerValue(headers, 'content-md5'),
    headerValue(headers, 'content-type'),
    input.date,
    canonicalAmzHeaders(headers) + input.resource,
  ].join('\n');
}

/** The resources a client may have signed: path and subresource values as S3 documents them first, then as sent. */
function candidateResources(rawPath: string, rawQuery: string): string[] {
  const paths = [...new Set([rawPath || '/', canonicalPath(rawPath)])];
  // A bare bucket (`/bucket`): botocore signs it as `/bucket/`; no key is empty, so that names nothing else.
  if (/^\/[^/]+$/.test(rawPath)) paths.push(`${canonicalPath(rawPath)}/`);
  const queries = [...new Set([signedSubresources(rawQuery, true), signedSubresources(rawQuery, false)])];
  return paths.flatMap((path) => queries.map((query) => path + query));
}

function queryValue(rawQuery: string, name: string): string | undefined {
  return parseRawQuery(rawQuery).find(([k]) => k === name)?.[1];
}

/** `Authorization: AWS <AccessKeyId>:<Signature>` → its parts; S3's 400 InvalidArgument when malformed. */
function parseAuthorization(authorization: string): { accessKey: string; signature: string } {
  const value = authorization.slice('AWS '.length).trim();
  const colon = value.lastIndexOf(':');
  if (colon <= 0 || colon === value.length - 1) {
    throw new S3Error('InvalidArgument', 'AWS authorization header is invalid.  Expected AwsAccessKeyId:signature', {
      ArgumentName: 'Authorization',
      ArgumentValue: authorization,
    });
  }
  return { accessKey: value.slice(0, colon), signature: value.slice(colon + 1) };
}

export interface VerifyV2Options {
  now?: Date;
}

/**
 * Verify a SigV2 request (Authorization header or presigned query), `req.url` path style
 * (`/bucket/key?query`, as sent: still percent-encoded). Throws what S3 answers: InvalidArgument
 * (malformed header), AccessDenied (no date, missing query parameters, "Request has expired", unsigned
 * x-service-* headers), RequestTimeTooSkewed (15 min), InvalidAccessKeyId, SignatureDoesNotMatch (with
 * the StringToSign the server computed, as S3 gives it).
 */
export async function verifySigV2(req: SigV4Request, lookup: CredentialLookup, opts: VerifyV2Options = {}): Promise<Credential> {
  const now = opts.now ?? new Date();
  const q = req.url.indexOf('?');
  const rawPath = q < 0 ? req.url : req.url.slice(0, q);
  const rawQuery = q < 0 ? '' : req.url.slice(q + 1);
  const sent = req.headers.authorization;
  const authorization = Array.isArray(sent) ? sent[0] : sent;
  const presigned = !isSigV2Header(authorization);

  let accessKey: string;
  let signature: string;
  let date: string;
  if (presigned) {
    const [ak, expires, sig] = QUERY_PARAMETERS.map((name) => queryValue(rawQuery, name));
    if (!ak || !expires || !sig) throw new S3Error('AccessDenied', 'Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters');
    if (!/^\d{1,15}$/.test(expires)) throw new S3Error('AccessDenied', `Invalid date (should be seconds since epoch): ${expires}`);
    if (now.getTime() > Number(expires) * 1000) {
      throw new S3Error('AccessDenied', 'Request has expired', { Expires: new Date(Number(expires) * 1000).toISOString(), ServerTime: now.toISOString() });
    }
    [accessKey, signature, date] = [ak, sig, expires];
  } else {
    ({ accessKey, signature } = parseAuthorization(authorization!));
    // x-amz-date, when sent (even empty), is the request's date; Date only without it (as S3). A date
    // before the epoch is no valid date either.
    const amzDateSent = req.headers['x-amz-date'] !== undefined;
    const amzDate = headerValue(req.headers, 'x-amz-date');
    const requestDate = amzDateSent ? amzDate : headerValue(req.headers, 'date');
    const when = requestDate ? (parseAmzDate(requestDate)?.getTime() ?? Date.parse(requestDate)) : NaN;
    if (Number.isNaN(when) || when < 0) throw new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
    if (Math.abs(now.getTime() - when) > MAX_SKEW_MS) {
      throw new S3Error('RequestTimeTooSkewed', undefined, {
        RequestTime: requestDate,
        ServerTime: now.toISOString(),
        MaxAllowedSkewMilliseconds: String(MAX_SKEW_MS),
      });
    }
    // With x-amz-date the Date line is empty (x-amz-date is among the signed x-amz-* headers).
    date = amzDateSent ? '' : requestDate;
  }
  // SigV2 signs every x-amz-* header; Strata's own x-service-* ones it cannot cover.
  checkAllAmzHeadersSigned(
    req.headers,
    Object.keys(req.headers).filter((name) => name.toLowerCase().startsWith('x-amz-')),
  );

  const credential = await lookup(accessKey);
  const candidates = candidateResources(rawPath, rawQuery).map((resource) => stringToSignV2({ method: req.method, headers: req.headers, date, resource }));
  if (candidates.some((text) => signaturesEqual(signV2(credential.secretKey, text), signature))) return credential;
  throw signatureDoesNotMatch(accessKey, candidates[0]!, signature);
}

/** S3's SignatureDoesNotMatch for SigV2: the string the server signed, as text and as bytes, to compare with the client's. */
export function signatureDoesNotMatch(accessKey: string, stringToSign: string, signatureProvided: string): S3Error {
  return new S3Error('SignatureDoesNotMatch', undefined, {
    AWSAccessKeyId: accessKey,
    StringToSign: stringToSign,
    SignatureProvided: signatureProvided,
    StringToSignBytes: [...Buffer.from(stringToSign, 'utf8')].map((b) => b.toString(16).padStart(2, '0')).join(' '),
  });
}
