import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type http from 'node:http';
import { S3Error, sseResponseHeaders, type SseAnswer, type SseRequest } from '../../../object-model/src/index.js';

/**
 * Server-side encryption headers (the data plane encrypts: data-plane/src/encryption/). They are checked
 * as S3 checks them first (a malformed request gets S3's 400), then passed on as an SseRequest
 * (sseRequestOf). A browser form (PostObject) asks the same with form fields of the same names.
 * Dual-layer encryption (`aws:kms:dsse`) is not offered: it is refused (NotImplemented) rather than
 * stored with one layer, since a client that asked for two layers must not believe it got them.
 */
const WRITES = new Set(['PutObject', 'CopyObject', 'CreateMultipartUpload', 'UploadPart', 'UploadPartCopy', 'PostObject']);
/** Reads of an object's bytes or metadata: an SSE-C object's need its key (GetObjectAttributes as HEAD, as S3). */
const READS = new Set(['GetObject', 'HeadObject', 'GetObjectAttributes']);

const SSE = 'x-amz-server-side-encryption';
const DUAL_LAYER = 'aws:kms:dsse';
const SSE_VALUES = new Set(['AES256', 'aws:kms', DUAL_LAYER]);
/** The S3 operations whose request may carry a customer key for the object (SSE-C). */
const CUSTOMER_KEYED = new Set([...WRITES, ...READS]);
/** Headers that only go with `x-amz-server-side-encryption: aws:kms` (or aws:kms:dsse). */
const KMS_FIELDS = [`${SSE}-aws-kms-key-id`, `${SSE}-context`];

/** A header's or form field's value by lower-case name. */
type Lookup = (name: string) => string | undefined;

function isEncryptionField(name: string): boolean {
  return name.startsWith(SSE) || name.startsWith('x-amz-copy-source-server-side-encryption');
}

/** The first encryption header or form field among `names` (lower case), if any. */
function encryptionAsked(names: Iterable<string>): string | undefined {
  for (const name of names) if (isEncryptionField(name)) return name;
  return undefined;
}

/** Whether any header is an encryption header (most requests send none). */
function asksEncryption(headers: IncomingHttpHeaders): boolean {
  for (const name in headers) if (isEncryptionField(name)) return true;
  return false;
}

function invalid(message: string, name: string, value?: string): S3Error {
  return new S3Error('InvalidArgument', message, { ArgumentName: name, ...(value === undefined ? {} : { ArgumentValue: value }) });
}

/** The SSE-C triple under `prefix` (the object's or the copy source's), if any of it is there: all three, AES256, a 256-bit key and its MD5. */
function checkCustomerKey(lookup: Lookup, prefix: string): boolean {
  const algorithm = lookup(`${prefix}-customer-algorithm`);
  const key = lookup(`${prefix}-customer-key`);
  const md5 = lookup(`${prefix}-customer-key-md5`);
  if (algorithm === undefined && key === undefined && md5 === undefined) return false;
  const what = 'Requests specifying Server Side Encryption with Customer provided keys must provide';
  if (algorithm === undefined) throw invalid(`${what} a valid encryption algorithm.`, `${prefix}-customer-algorithm`);
  if (algorithm !== 'AES256') throw invalid('The encryption algorithm specified is not valid.', `${prefix}-customer-algorithm`, algorithm);
  if (key === undefined) throw invalid(`${what} an appropriate secret key.`, `${prefix}-customer-key`);
  const raw = Buffer.from(key, 'base64');
  if (raw.length !== 32 || raw.toString('base64') !== key) throw invalid('The secret key was invalid for the specified algorithm.', `${prefix}-customer-key`);
  if (md5 === undefined) throw invalid(`${what} the client calculated MD5 of the secret key.`, `${prefix}-customer-key-md5`);
  if (createHash('md5').update(raw).digest('base64') !== md5)
    throw invalid('The calculated MD5 hash of the key did not match the hash that was provided.', `${prefix}-customer-key-md5`);
  return true;
}

/** S3's checks of a request's encryption headers (InvalidArgument): a known method, KMS fields only with KMS, SSE-C complete and alone. */
function checkEncryptionHeaders(lookup: Lookup): void {
  const method = lookup(SSE);
  if (method !== undefined && !SSE_VALUES.has(method)) throw invalid(`${method} is not a server-side encryption method.`, SSE, method);
  const kmsField = KMS_FIELDS.find((name) => lookup(name) !== undefined);
  if (kmsField && !method?.startsWith('aws:kms'))
    throw invalid(`Server Side Encryption with AWS KMS managed key requires HTTP header ${SSE} : aws:kms`, kmsField);
  if (checkCustomerKey(lookup, SSE) && method !== undefined)
    throw invalid('Server Side Encryption with Customer provided key is incompatible with the encryption method specified', SSE, method);
  checkCustomerKey(lookup, 'x-amz-copy-source-server-side-encryption');
}

/**
 * S3's NotImplemented (501, "A header you provided implies functionality that is not implemented", naming
 * the header) for dual-layer encryption, which S3 offers and Strata does not (`where`: the header or field).
 */
export function dualLayerNotImplemented(where?: string): S3Error {
  return new S3Error('NotImplemented', undefined, where ? { Header: where } : undefined);
}

/** A write's encryption headers or form fields (`names`, `lookup`) checked as S3 checks them; dual-layer is NotImplemented. */
function checkWriteEncryption(names: Iterable<string>, lookup: Lookup): void {
  if (encryptionAsked(names) === undefined) return;
  checkEncryptionHeaders(lookup);
  if (lookup(SSE) === DUAL_LAYER) throw dualLayerNotImplemented(SSE);
}

/** A browser form's encryption fields (by lower-case name), checked as the same headers of a PUT. */
export function checkFormEncryption(fields: ReadonlyMap<string, string>): void {
  checkWriteEncryption(fields.keys(), (name) => fields.get(name));
}

/** What a browser form's encryption fields (checked by checkFormEncryption) ask, for the data plane. */
export function sseRequestOfForm(fields: ReadonlyMap<string, string>): SseRequest | undefined {
  return sseRequestFrom((name) => fields.get(name));
}

function lookupOf(headers: IncomingHttpHeaders): Lookup {
  return (name) => {
    const v = headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
}

/**
 * S3's checks of a request's encryption headers: writes as checkWriteEncryption; reads refuse SSE-S3/KMS headers (InvalidArgument, as S3 answers
 * them on a GET or HEAD), and their customer key must be well formed.
 */
export function checkServerSideEncryption(operation: string, headers: IncomingHttpHeaders): void {
  const lookup = lookupOf(headers);
  if (WRITES.has(operation)) {
    checkWriteEncryption(Object.keys(headers), lookup);
    return;
  }
  if (!READS.has(operation) || !asksEncryption(headers)) return;
  const kms = [SSE, ...KMS_FIELDS, `${SSE}-bucket-key-enabled`].find((name) => lookup(name) !== undefined);
  if (kms) throw invalid(`${kms} is not supported on a ${operation === 'HeadObject' ? 'HEAD' : 'GET'} request.`, kms, lookup(kms));
  checkCustomerKey(lookup, SSE);
}

/** What a request (checked by checkServerSideEncryption) asks, for the data plane; undefined when nothing. */
export function sseRequestOf(operation: string, headers: IncomingHttpHeaders): SseRequest | undefined {
  // (Every field read is an encryption header: without one, nothing is asked.)
  return CUSTOMER_KEYED.has(operation) && asksEncryption(headers) ? sseRequestFrom(lookupOf(headers)) : undefined;
}

function sseRequestFrom(lookup: Lookup): SseRequest | undefined {
  const method = lookup(SSE);
  const sse: SseRequest = {
    ...(method === 'AES256' || method === 'aws:kms' ? { method } : {}),
    ...(method === 'aws:kms' && lookup(KMS_FIELDS[0]!) ? { kmsKeyId: lookup(KMS_FIELDS[0]!) } : {}),
    ...(lookup(`${SSE}-customer-key`) ? { customerKey: lookup(`${SSE}-customer-key`) } : {}),
    ...(lookup('x-amz-copy-source-server-side-encryption-customer-key')
      ? { copySourceCustomerKey: lookup('x-amz-copy-source-server-side-encryption-customer-key') }
      : {}),
  };
  return Object.keys(sse).length ? sse : undefined;
}

/** An answer's encryption headers (x-amz-server-side-encryption*, as S3 answers PUT, GET, HEAD, copy and multipart). */
export function setSseHeaders(res: http.ServerResponse, sse: SseAnswer | undefined): void {
  for (const [name, value] of Object.entries(sseResponseHeaders(sse))) res.setHeader(name, value);
}

/** An SSE-C part upload's answer echoes the customer key's algorithm and MD5 (as S3); none without one. */
export function customerKeyAnswer(req: http.IncomingMessage): SseAnswer | undefined {
  const md5 = lookupOf(req.headers)(`${SSE}-customer-key-md5`);
  return md5 ? { customerKeyMd5: md5 } : undefined;
}
