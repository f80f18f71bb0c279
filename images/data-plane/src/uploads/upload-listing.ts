import { pageSize } from '../../../object-model/src/index.js';
import type { UploadInfo } from './upload-state.js';

/** What a ListMultipartUploads asks: its prefix and delimiter, where the page starts, how long it is. */
export interface UploadListingQuery {
  prefix?: string;
  delimiter?: string;
  keyMarker?: string;
  uploadIdMarker?: string;
  maxUploads?: number;
}

/**
 * A page of ListMultipartUploads over a bucket's uploads in progress: in byte order of key, then upload
 * id, after the markers; with a delimiter, the keys that hold it after the prefix are rolled up into
 * common prefixes, each counted as one entry (a key marker that is such a prefix continues after
 * everything under it, as S3).
 */
export function uploadListingPage(inProgress: Array<{ uploadId: string; info: UploadInfo }>, query: UploadListingQuery) {
  const prefix = query.prefix ?? '';
  const delimiter = query.delimiter || undefined;
  const maxUploads = pageSize(query.maxUploads);
  const uploads = inProgress
    .filter((u) => u.info.key.startsWith(prefix))
    .map(({ uploadId, info }) => ({ key: info.key, uploadId, initiated: info.initiated, owner: info.owner }));
  const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
  uploads.sort((a, b) => byteOrder(a.key, b.key) || byteOrder(a.uploadId, b.uploadId));
  const markerIsPrefix = delimiter !== undefined && query.keyMarker !== undefined && query.keyMarker.endsWith(delimiter);
  const after = uploads.filter((u) => {
    if (query.keyMarker === undefined) return true;
    if (markerIsPrefix && u.key.startsWith(query.keyMarker)) return false;
    const c = byteOrder(u.key, query.keyMarker);
    return c > 0 || (c === 0 && query.uploadIdMarker !== undefined && u.uploadId > query.uploadIdMarker);
  });
  const page: typeof uploads = [];
  const commonPrefixes: string[] = [];
  let isTruncated = false;
  let last: { key: string; uploadId?: string } | undefined;
  for (const u of after) {
    const at = delimiter === undefined ? -1 : u.key.indexOf(delimiter, prefix.length);
    const common = at >= 0 ? u.key.slice(0, at + delimiter!.length) : undefined;
    if (common !== undefined && common === commonPrefixes[commonPrefixes.length - 1]) continue;
    if (page.length + commonPrefixes.length === maxUploads) {
      isTruncated = true;
      break;
    }
    if (common !== undefined) {
      commonPrefixes.push(common);
      last = { key: common };
    } else {
      page.push(u);
      last = { key: u.key, uploadId: u.uploadId };
    }
  }
  return {
    uploads: page,
    commonPrefixes,
    isTruncated,
    ...(isTruncated && last ? { nextKeyMarker: last.key, ...(last.uploadId ? { nextUploadIdMarker: last.uploadId } : {}) } : {}),
  };
}
