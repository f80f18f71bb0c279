// What a caller may read: the object store's own rule, asked of every indexed image. An image's source
// follows from its path: `s3/<bucket>/...` (MIRROR_FOLDER) was mirrored from that bucket, anything else
// is the local image directory ("directory"). A bucket image is readable by whom the gateway would let
// GET its object: the bucket's owner (who may do everything in it), the users its ACL grants READ (the
// object's owner included), any logged-in user under authenticated-read, anyone under public-read; also
// by admins, and by everyone when the bucket is named in IMAGE_SEARCH_PUBLIC_SOURCES. The bucket's owner
// is the user whose credentials the bucket source reads it with (it can only list buckets it owns), the
// ACL is the one that source read at its last round (object-acl.ts); a bucket whose owner is not known
// (not the current source, or not learned yet) and an object whose ACL is not known are shown by the
// owner rule alone, failing closed. The local directory is readable by any valid token, and by everyone
// when "directory" is public (the default).
// Image bytes of what is not public are served against a URL this service signed for one who may read
// it (HMAC of path and expiry: a presigned URL of image search), so that <img> tags work.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { MIRROR_FOLDER } from './bucket-source.js';
import type { MirroredObject } from './object-acl.js';
import type { Caller } from './http/auth.js';

/** The name of the local image directory in IMAGE_SEARCH_PUBLIC_SOURCES. */
export const DIRECTORY_SOURCE = 'directory';

/** How long a signed image URL serves its image. */
export const IMAGE_URL_SECONDS = 3600;

export type ImageSource = { kind: 'directory' } | { kind: 'bucket'; bucket: string };

/** What one caller sees: which indexed paths, and the URL their bytes are served at. */
export interface Viewer {
  mayRead(path: string): boolean;
  url(path: string): string;
  /** The bucket object a mirrored image is (its labels show `bucket/key`), when known. */
  objectOf?(path: string): { bucket: string; key: string } | undefined;
  /** The URL of the thumbnail of indexed image `id` at `path`, `size` px (signed like url()). */
  thumbnailUrl(id: number, path: string, size: number): string;
}

export interface ImageAccessOptions {
  /** Sources anonymous callers may read: DIRECTORY_SOURCE and/or bucket names. */
  publicSources: readonly string[];
  /** The owner of a bucket, when known. */
  ownerOf: (bucket: string) => string | undefined;
  /** The object a mirrored path holds, with the readers its ACL names, when known. */
  objectOf?: (path: string) => MirroredObject | undefined;
  /** Key of the signed image URLs (derive it from a configured secret, so that replicas agree); random when absent. */
  signingSecret?: string;
  now?: () => number;
}

export function sourceOf(path: string): ImageSource {
  const [top, bucket, rest] = path.split('/', 3);
  return top === MIRROR_FOLDER && bucket && rest !== undefined ? { kind: 'bucket', bucket } : { kind: 'directory' };
}

const encodePath = (relative: string) => '/images/' + relative.split('/').map(encodeURIComponent).join('/');

export class ImageAccess {
  private readonly key: Buffer;
  private readonly publicSources: ReadonlySet<string>;

  constructor(private readonly opts: ImageAccessOptions) {
    this.publicSources = new Set(opts.publicSources);
    this.key = opts.signingSecret ? createHmac('sha256', opts.signingSecret).update('strata image-search image URLs').digest() : randomBytes(32);
  }

  isPublic(path: string): boolean {
    const source = sourceOf(path);
    return this.publicSources.has(source.kind === 'directory' ? DIRECTORY_SOURCE : source.bucket);
  }

  mayRead(caller: Caller, path: string): boolean {
    if (caller.kind === 'admin' || this.isPublic(path)) return true;
    const source = sourceOf(path);
    if (source.kind === 'directory') return caller.kind !== 'anonymous';
    const readers = this.opts.objectOf?.(path)?.readers;
    if (readers?.everyone) return true;
    if (caller.kind === 'anonymous') return false;
    if (readers?.authenticated) return true;
    return this.opts.ownerOf(source.bucket) === caller.username || !!readers?.users.includes(caller.username);
  }

  viewer(caller: Caller): Viewer {
    return {
      mayRead: (path) => this.mayRead(caller, path),
      url: (path) => this.url(path),
      objectOf: (path) => {
        const object = this.opts.objectOf?.(path);
        return object && { bucket: object.bucket, key: object.key };
      },
      thumbnailUrl: (id, path, size) => this.thumbnailUrl(id, path, size),
    };
  }

  /** The browser URL of an image: plain when public, else signed (to be handed only to one who may read it). */
  url(path: string): string {
    return this.isPublic(path) ? encodePath(path) : `${encodePath(path)}?${this.signedQuery(path)}`;
  }

  /** The URL of an indexed image's thumbnail: signed as url() is, for the image's path (one signature serves both). */
  thumbnailUrl(id: number, path: string, size: number): string {
    const url = `/api/images/${id}/thumbnail?size=${size}`;
    return this.isPublic(path) ? url : `${url}&${this.signedQuery(path)}`;
  }

  private signedQuery(path: string): string {
    const expires = Math.floor(this.now() / 1000) + IMAGE_URL_SECONDS;
    return `expires=${expires}&signature=${this.signature(path, expires)}`;
  }

  /** Whether `expires` and `signature` (query parameters) are a live signature of this path. */
  signedFor(path: string, expires: unknown, signature: unknown): boolean {
    if (typeof expires !== 'string' || typeof signature !== 'string' || !/^\d{1,12}$/.test(expires)) return false;
    if (Number(expires) * 1000 < this.now()) return false;
    const want = Buffer.from(this.signature(path, Number(expires)));
    const got = Buffer.from(signature);
    return want.length === got.length && timingSafeEqual(want, got);
  }

  private signature(path: string, expires: number): string {
    return createHmac('sha256', this.key).update(`${path}\n${expires}`).digest('base64url');
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }
}
