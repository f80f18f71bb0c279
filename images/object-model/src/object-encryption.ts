import { z } from 'zod';
import { S3Error } from './s3-errors.js';
import type { StoredHeaders } from './stored-headers.js';

/**
 * Server-side encryption as it crosses the services. The gateway checks a request's S3 headers and
 * passes what they ask as one internal header (SSE_REQUEST_HEADER); the data plane encrypts and
 * decrypts, and keeps each object's encryption record (wrapped data key, key ids) in the object's stored
 * headers under ENCRYPTION_ENTRY. That entry never leaves the data plane: objectMetaOf turns it into
 * the public SseAnswer (what S3 echoes: the algorithm, the KMS key id, the customer key's MD5).
 */

/** What a request asks: SSE-S3 (`AES256`), SSE-KMS (`aws:kms`, a key id), SSE-C (the customer's key, base64). */
export interface SseRequest {
  method?: 'AES256' | 'aws:kms';
  kmsKeyId?: string;
  /** Base64 of the 256-bit customer key (SSE-C): used for this request only, never stored. */
  customerKey?: string;
  /** The copy source's customer key (x-amz-copy-source-server-side-encryption-customer-key). */
  copySourceCustomerKey?: string;
}

/** An object's encryption as S3 answers it. */
export interface SseAnswer {
  /** x-amz-server-side-encryption (SSE-S3 and SSE-KMS); absent for SSE-C. */
  algorithm?: 'AES256' | 'aws:kms';
  kmsKeyId?: string;
  /** Base64 MD5 of the customer key (SSE-C). */
  customerKeyMd5?: string;
}

/** The internal header that carries an SseRequest (JSON) from the gateway to the data plane. */
export const SSE_REQUEST_HEADER = 'x-strata-sse';
/** The data plane's answer header with an object's SseAnswer (JSON). */
export const SSE_ANSWER_HEADER = 'x-strata-sse-answer';
/** The stored-headers entry that holds the data plane's encryption record (JSON); never answered. */
export const ENCRYPTION_ENTRY = 'x-strata-encryption';

const SSE_REQUEST = z.object({
  method: z.enum(['AES256', 'aws:kms']).optional(),
  kmsKeyId: z.string().min(1).optional(),
  customerKey: z.string().optional(),
  copySourceCustomerKey: z.string().optional(),
});

/** An SseAnswer as the internal answers carry it. */
export const SSE_ANSWER = z.object({
  algorithm: z.enum(['AES256', 'aws:kms']).optional(),
  kmsKeyId: z.string().optional(),
  customerKeyMd5: z.string().optional(),
});

/** An SseRequest as the internal header carries it; undefined when nothing is asked. */
export function encodeSseRequest(sse: SseRequest | undefined): string | undefined {
  return sse && Object.keys(sse).length ? JSON.stringify(sse) : undefined;
}

/** The internal header's SseRequest; InvalidArgument when it is malformed. */
export function readSseRequest(raw: string | string[] | undefined): SseRequest | undefined {
  if (raw === undefined || raw === '') return undefined;
  try {
    return SSE_REQUEST.parse(JSON.parse(Array.isArray(raw) ? raw.join(',') : raw));
  } catch {
    throw new S3Error('InvalidArgument', `${SSE_REQUEST_HEADER} must be a JSON encryption request`);
  }
}

/** The answer header's SseAnswer; undefined when absent or malformed (informative only). */
export function readSseAnswer(raw: string | string[] | undefined): SseAnswer | undefined {
  if (typeof raw !== 'string' || raw === '') return undefined;
  try {
    return SSE_ANSWER.parse(JSON.parse(raw));
  } catch {
    return undefined;
  }
}

/** The S3 response headers of an object's encryption (PUT, GET, HEAD, copy, multipart answers). */
export function sseResponseHeaders(sse: SseAnswer | undefined): Record<string, string> {
  if (!sse) return {};
  if (sse.customerKeyMd5)
    return { 'x-amz-server-side-encryption-customer-algorithm': 'AES256', 'x-amz-server-side-encryption-customer-key-md5': sse.customerKeyMd5 };
  return {
    ...(sse.algorithm ? { 'x-amz-server-side-encryption': sse.algorithm } : {}),
    ...(sse.kmsKeyId ? { 'x-amz-server-side-encryption-aws-kms-key-id': sse.kmsKeyId } : {}),
  };
}

/** The stored headers without the encryption record, and the record's public part. */
export function splitEncryption(headers: StoredHeaders | undefined | null): { headers?: StoredHeaders; sse?: SseAnswer } {
  if (!headers) return {};
  const { [ENCRYPTION_ENTRY]: record, ...rest } = headers;
  const kept = Object.keys(rest).length ? rest : undefined;
  if (record === undefined) return { headers: kept };
  let sse: SseAnswer | undefined;
  try {
    const r = JSON.parse(record) as { alg?: string; kms?: string; keyMd5?: string };
    sse = r.alg === 'SSE-C' ? { customerKeyMd5: r.keyMd5 } : { algorithm: r.alg === 'aws:kms' ? 'aws:kms' : 'AES256', ...(r.kms ? { kmsKeyId: r.kms } : {}) };
  } catch {
    sse = { algorithm: 'AES256' };
  }
  return { headers: kept, sse };
}
