import type { IncomingHttpHeaders } from 'node:http';
import { S3Error } from '../../../object-model/src/index.js';

/**
 * Server-side encryption. Strata stores bytes as they came (the backend's own disk or server encryption
 * is the place for encryption at rest), so a request that asks for SSE-S3, SSE-KMS or SSE-C is refused
 * rather than answered 200 with the object stored in the clear: a client that asked for encryption must
 * not believe it got it. (MinIO without a KMS refuses them the same way.)
 */
const WRITES = new Set(['PutObject', 'CopyObject', 'CreateMultipartUpload', 'UploadPart', 'UploadPartCopy', 'PostObject']);
const READS = new Set(['GetObject', 'HeadObject']);

function isEncryptionField(name: string): boolean {
  return name.startsWith('x-amz-server-side-encryption') || name.startsWith('x-amz-copy-source-server-side-encryption');
}

/** The first encryption header or form field among `names` (lower case), if any. */
function encryptionAsked(names: Iterable<string>): string | undefined {
  for (const name of names) if (isEncryptionField(name)) return name;
  return undefined;
}

/** NotImplemented when a write's headers or form fields (`names`) ask for encryption. */
export function refuseEncryptedWrite(names: Iterable<string>): void {
  const asked = encryptionAsked(names);
  if (asked !== undefined) throw new S3Error('NotImplemented', `Strata does not encrypt objects itself (${asked}); nothing was stored.`);
}

/**
 * NotImplemented for a write that asks for encryption; InvalidRequest for a read that brings a customer
 * key (SSE-C), as S3 answers for an object not encrypted with one.
 */
export function refuseServerSideEncryption(operation: string, headers: IncomingHttpHeaders): void {
  if (WRITES.has(operation)) {
    refuseEncryptedWrite(Object.keys(headers));
    return;
  }
  if (!READS.has(operation)) return;
  const asked = encryptionAsked(Object.keys(headers));
  if (asked?.startsWith('x-amz-server-side-encryption-customer-'))
    throw new S3Error('InvalidRequest', 'The encryption parameters are not applicable to this object.');
}
