import type http from 'node:http';
import { BUCKET_HEADER, encodeWireHeader, type BucketInfo } from '../../../object-model/src/index.js';

/**
 * The header that hands a plane the bucket record the request was authorised against
 * (x-strata-bucket, or `wire`: x-strata-source-bucket), so that it serves that bucket and resolves no
 * name itself (hack/adr/0007-bucket-resolution.md). None from a source that gave no row id (e.g. a
 * test's fake layer): the plane then resolves the name.
 */
export function bucketRecordHeader(bucket: BucketInfo | undefined, wire = BUCKET_HEADER): http.OutgoingHttpHeaders {
  if (bucket?.id === undefined) return {};
  const { id, name, owner, backend, encryption } = bucket;
  return { [wire.name]: encodeWireHeader(wire, { id, name, owner, backend, ...(encryption ? { encryption } : {}) }) };
}
