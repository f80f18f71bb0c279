import { createHash } from 'node:crypto';
import { checkPartOrder, compositeChecksum, fullObjectChecksum, S3Error, unquoteEtag, type RequestedPart } from '../../../object-model/src/index.js';
import type { PartInfo, UploadChecksum, UploadInfo } from './upload-state.js';

export const MIN_PART_SIZE = 5 * 1024 * 1024;

/**
 * The stored parts a CompleteMultipartUpload names, in its order: part numbers ascending, each part's
 * ETag (and checksum, when listed) the one it was uploaded with, and every part but the last at least
 * MIN_PART_SIZE (S3's rules and error codes).
 */
export type { RequestedPart };

export function chosenParts(uploadId: string, info: UploadInfo, requested: RequestedPart[], stored: Map<number, PartInfo>): PartInfo[] {
  checkPartOrder(requested, uploadId);
  const chosen: PartInfo[] = [];
  for (const r of requested) {
    const n = r.partNumber;
    const part = stored.get(n);
    const etag = unquoteEtag(String(r.etag ?? '')).toLowerCase();
    if (!part || part.etag !== etag) throw new S3Error('InvalidPart', undefined, { UploadId: uploadId, PartNumber: String(n), ETag: etag });
    // A checksum the client lists for a part must be the one the part was uploaded with.
    if (info.checksum && r.checksum && (r.checksum.algorithm !== info.checksum.algorithm || r.checksum.value !== part.checksum)) {
      throw new S3Error('InvalidPart', `The ${r.checksum.algorithm} checksum listed for part ${n} is not the one it was uploaded with.`, {
        UploadId: uploadId,
        PartNumber: String(n),
        ETag: etag,
      });
    }
    chosen.push(part);
  }
  chosen.slice(0, -1).forEach((p) => {
    if (p.size < MIN_PART_SIZE) {
      throw new S3Error('EntityTooSmall', undefined, {
        UploadId: uploadId,
        PartNumber: String(p.partNumber),
        ProposedSize: String(p.size),
        MinSizeAllowed: String(MIN_PART_SIZE),
      });
    }
  });
  return chosen;
}

/** S3's multipart ETag: the MD5 of the parts' binary MD5s, then `-` and how many parts. */
export function multipartEtag(parts: PartInfo[]): string {
  const md5 = createHash('md5')
    .update(Buffer.concat(parts.map((p) => Buffer.from(p.etag, 'hex'))))
    .digest('hex');
  return `${md5}-${parts.length}`;
}

/**
 * The object's checksum from its parts': COMPOSITE (a checksum of the parts' checksums, `-N`) or
 * FULL_OBJECT (the CRC of all its bytes, combined from the parts' CRCs). One the client sent for the
 * whole object must match (BadDigest, the upload stays in progress).
 */
export async function objectChecksum(upload: UploadChecksum, parts: PartInfo[], expected: { algorithm: string; value: string } | undefined) {
  if (parts.some((p) => p.checksum === undefined)) throw new S3Error('InvalidPart', `Every part of this upload needs its ${upload.algorithm} checksum.`);
  const value =
    upload.type === 'COMPOSITE'
      ? await compositeChecksum(
          upload.algorithm,
          parts.map((p) => p.checksum!),
        )
      : fullObjectChecksum(
          upload.algorithm,
          parts.map((p) => ({ value: p.checksum!, size: p.size })),
        );
  if (expected) {
    if (expected.algorithm !== upload.algorithm)
      throw new S3Error('InvalidRequest', `The upload was created using the ${upload.algorithm} checksum algorithm, not ${expected.algorithm}.`);
    // (A composite checksum may be sent with or without its `-N`.)
    if (expected.value !== value && `${expected.value}-${parts.length}` !== value) {
      throw new S3Error('BadDigest', `The ${upload.algorithm} you specified for the whole object did not match the one calculated from its parts.`);
    }
  }
  return { algorithm: upload.algorithm, value, type: upload.type };
}
