// Images from a bucket prefix of Strata's object store (IMAGE_SEARCH_SOURCE_S3_URL=s3://bucket/prefix):
// the image objects under the prefix are mirrored into a folder of the image directory of their own
// (MIRROR_FOLDER: object `key` of `bucket` is the file `s3/<bucket>/<hash of key>.<ext>`, flat, so that
// every legal key has a file, `x.jpg` and `x.jpg/inner.jpg` alike; the key is kept in the record) and
// indexed, at start, on object
// events and every IMAGE_SEARCH_SOURCE_SYNC_SECONDS, so that the index follows the bucket exactly:
// a new object is added, an object whose content changed (ETag) is fetched again and its new vector
// replaces the old one, an object that left the prefix leaves the index and the mirror. The record
// of the mirror (MIRROR_RECORD: ETag and size per path, and why an object is not indexed) survives
// restarts; an object that does not decode, or that an admin removed from the index, stays in `skipped`
// and is left alone until it changes. A round commits what it finished: an object it could not fetch is
// reported in `skipped` and tried again at the next round, and never stops the others.
// Each round also learns who may see each image (object-acl.ts): the ACLs that may have changed
// (acl-refresh.ts) and the bucket's public access block, kept in the record.
// Files that did not come from the bucket are never written or removed. Listing and downloads are
// ordinary S3 requests (ListObjectsV2, GET) signed with SigV4, so any S3 API works, Strata's gateway included.
import { createHash } from 'node:crypto';
import { existsSync, promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { XMLParser } from 'fast-xml-parser';
import type { Logger } from '../../service-kit/src/index.js';
import { signedHeaders, type S3Location } from './clip/model-files.js';
import { fetchFromStore } from './store-fetch.js';
import type { ImageFiles } from './image-files.js';
import { unsupportedReason } from './image-formats.js';
import { AclRefresh } from './acl-refresh.js';
import { toHashedLayout } from './mirror-layout.js';
import { effectiveReaders, isObjectReaders, readReaders, type MirroredObject, type ObjectReaders } from './object-acl.js';
import { streamToFileAtomic, writeFileAtomic } from './atomic-file.js';
import type { SearchService } from './search-service.js';

export interface BucketSourceOptions {
  location: S3Location;
  files: ImageFiles;
  service: SearchService;
  logger: Logger;
  /** Largest object mirrored (bigger ones are skipped). */
  maxObjectBytes?: number;
  /** Seconds between rounds that read every image's ACL (AclRefresh; 0: every round). */
  aclRefreshSeconds?: number;
  /** The clock of those full passes. */
  now?: () => number;
  /** Silence from the object store, ms, after which a request fails (its round then fails, and the next one retries). Default 30 s. */
  requestIdleMs?: number;
  /** How long stop() lets a running round finish before giving up its requests. Default 5 s. */
  stopGraceMs?: number;
}

export interface SyncResult {
  listed: number;
  downloaded: number;
  /** Images sent to the encoder this round (new or changed objects, and mirrored ones missing from the index). */
  encoded: number;
  added: number;
  /** Objects whose content changed (ETag): the new vector replaced the old one. */
  replaced: number;
  /** Mirrored images whose objects are gone from the prefix: dropped from the index and the mirror. */
  removed: number;
  /** Objects under the prefix that are not indexed, with the reason (undecodable ones stay here until they change). */
  skipped: Array<{ key: string; reason: string }>;
  /** GetObjectAcl requests of the round, and whether it read every image's ACL (a full pass). */
  aclReads: number;
  aclFullPass: boolean;
}

export interface BucketSourceStatus {
  kind: 'bucket';
  url: string;
  /** The image directory's folder that holds the mirror (paths of mirrored images start with it). */
  mirror: string;
  syncing: boolean;
  lastSync: (SyncResult & { finishedAt: string }) | null;
  /** Seconds since the last round that finished (null before the first): how far the index may lag the bucket. */
  lagSeconds: number | null;
  /** Why the last round failed (null when it finished); the rounds go on and it clears once one finishes. */
  lastError: string | null;
  lastErrorAt: string | null;
  /** The bucket's owner (the user the source reads it as), once learned; its images are theirs to see. */
  owner: string | null;
  /** Whether object events (created, recycled, restored) trigger syncs, and how many matching ones arrived. */
  events: 'none' | 'subscribed';
  eventsReceived: number;
}

interface ListedObject {
  key: string;
  size: number;
  etag: string;
  /** LastModified as listed. */
  modified?: string;
}

/**
 * What the record keeps per mirrored path: the object as listed, and why it is not indexed. Its ETag
 * is '' while a download is pending (fetched again at the next round).
 */
export interface MirrorEntry extends ListedObject {
  skipped?: string;
  /** Who the object store lets GET the object (its ACL at the last round that could read it). */
  readers?: ObjectReaders;
}

/**
 * The folder of the image directory the mirror lives in: object `key` of `bucket` is the file
 * `s3/<bucket>/<hash>.<ext>` (mirrorPathOf), so mirrored images never share a path with files from elsewhere.
 */
export const MIRROR_FOLDER = 's3';

/**
 * The mirror's path (relative to the image directory) of object `key` of `bucket`: one flat file per key,
 * named by the key's SHA-256, with the key's extension (the encoder and the browser go by it).
 */
export function mirrorPathOf(bucket: string, key: string): string {
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 40);
  return `${MIRROR_FOLDER}/${bucket}/${hash}${path.extname(key).toLowerCase()}`;
}

/** Why an object an admin removed from the index is not indexed again (until the object changes). */
export const REMOVED_BY_ADMIN = 'removed from the index by an admin (indexed again once the object changes)';
/** The record of what this source mirrored (JSON, in the mirror folder; not an image name, so never indexed). */
export const MIRROR_RECORD = '.strata-bucket-source.json';

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === 'Contents' });

/** An ETag as a plain token (listings quote it, some XML-escape the quotes). */
const etagOf = (value: unknown) => String(value ?? '').replace(/&quot;|"/g, '');

export class BucketSource {
  private readonly bucket: string;
  private readonly prefix: string;
  private timer: NodeJS.Timeout | null = null;
  private readonly stopping = new AbortController();
  /** A signed request to the object store, given up after requestIdleMs of silence or at stop(). */
  private readonly fetch = (url: URL) => fetchFromStore(url, signedHeaders(url, this.opts.location), this.opts.requestIdleMs, this.stopping.signal);
  private running: Promise<SyncResult> | null = null;
  private last: BucketSourceStatus['lastSync'] = null;
  private lastError: string | null = null;
  private lastErrorAt: string | null = null;
  /** Rounds and exclusions, one at a time (both rewrite the record). */
  private lock: Promise<unknown> = Promise.resolve();
  private pending = false;
  private owner: string | undefined;
  /** The mirror as of the last finished round (or the record at start): what each indexed path is. */
  private mirrored = new Map<string, MirrorEntry>();
  events: 'none' | 'subscribed' = 'none';
  private eventsSeen = 0;
  private readonly acls: AclRefresh;
  /** Whether the bucket ignores public grants (IgnorePublicAcls) as of the last round; unknown counts as yes. */
  private ignorePublic = true;

  constructor(private readonly opts: BucketSourceOptions) {
    this.acls = new AclRefresh(opts.aclRefreshSeconds ?? 300, opts.now);
    const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(opts.location.url);
    if (!match) throw new Error(`IMAGE_SEARCH_SOURCE_S3_URL must look like s3://bucket/prefix, got ${opts.location.url}`);
    this.bucket = match[1];
    this.prefix = match[2] && !match[2].endsWith('/') ? `${match[2]}/` : match[2];
  }

  status(): BucketSourceStatus {
    return {
      kind: 'bucket',
      url: this.opts.location.url,
      mirror: `${MIRROR_FOLDER}/${this.bucket}`,
      syncing: this.running !== null,
      lastSync: this.last,
      lagSeconds: this.last ? Math.max(0, Math.round((Date.now() - Date.parse(this.last.finishedAt)) / 1000)) : null,
      lastError: this.lastError,
      lastErrorAt: this.lastErrorAt,
      owner: this.owner ?? null,
      events: this.events,
      eventsReceived: this.eventsSeen,
    };
  }

  /** Sync now, then every `seconds` (0: only now). Failures are logged and retried at the next round. */
  start(seconds: number): void {
    const round = () => {
      this.sync().catch(() => undefined);
      if (seconds > 0) this.timer = setTimeout(round, seconds * 1000);
    };
    round();
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    // The running round may finish; one still waiting on the object store after stopGraceMs is given up.
    const giveUp = setTimeout(() => this.stopping.abort(new Error('the image search is stopping')), this.opts.stopGraceMs ?? 5_000);
    await this.running?.catch(() => undefined);
    clearTimeout(giveUp);
  }

  /** An object event (created, recycled, restored): sync when it is about this source. */
  onObjectEvent(bucket: unknown, key: unknown): void {
    if (!this.matches(bucket, key)) return;
    this.eventsSeen++;
    this.acls.name(key as string);
    this.requestSync();
  }

  /** The owner of `bucket` when it is this source's and the owner is known (ImageAccess asks). */
  ownerOf(bucket: string): string | undefined {
    return bucket === this.bucket ? this.owner : undefined;
  }

  /** The object a mirrored path holds (with who may read it), when it is this source's. */
  objectOf(relative: string): MirroredObject | undefined {
    const entry = this.mirrored.get(relative);
    return entry && { bucket: this.bucket, key: entry.key, readers: effectiveReaders(entry.readers, this.ignorePublic) };
  }

  /** Whether an object of the store belongs to this source (bucket and prefix). */
  matches(bucket: unknown, key: unknown): boolean {
    return bucket === this.bucket && typeof key === 'string' && key.startsWith(this.prefix);
  }

  /**
   * Ask for a sync soon (an object changed): runs now, or once more after the running round, so
   * that a burst of events costs at most one extra round.
   */
  requestSync(): void {
    if (this.running) {
      if (this.pending) return;
      this.pending = true;
      void this.running
        .catch(() => undefined)
        .then(() => {
          this.pending = false;
          return this.sync();
        })
        .catch(() => undefined);
      return;
    }
    this.sync().catch(() => undefined);
  }

  /** One round: list, mirror new or changed image objects, index what is not indexed yet, drop what is gone. */
  sync(): Promise<SyncResult> {
    if (!this.running) {
      this.running = this.locked(() => this.syncOnce()).then(
        (result) => {
          this.last = { ...result, finishedAt: new Date().toISOString() };
          this.lastError = null;
          this.running = null;
          if (result.downloaded || result.added || result.replaced || result.removed)
            this.opts.logger.info({ ...result, skipped: result.skipped.length }, 'image bucket synced');
          return result;
        },
        (err: unknown) => {
          this.lastError = err instanceof Error ? err.message : String(err);
          this.lastErrorAt = new Date().toISOString();
          this.running = null;
          this.opts.logger.warn({ error: this.lastError, url: this.opts.location.url }, 'image bucket sync failed');
          throw err;
        },
      );
    }
    return this.running;
  }

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.lock.then(fn);
    this.lock = result.catch(() => undefined);
    return result;
  }

  /**
   * Images an admin removed from the index (paths of the image directory): those of this mirror are
   * recorded as skipped (REMOVED_BY_ADMIN), so that rounds leave them out until their object changes.
   */
  exclude(paths: readonly string[]): Promise<void> {
    return this.locked(async () => {
      const record = await this.readRecord();
      let changed = false;
      for (const p of paths) {
        const entry = record.get(p);
        if (entry && entry.skipped === undefined) {
          record.set(p, { ...entry, skipped: REMOVED_BY_ADMIN });
          changed = true;
        }
      }
      if (changed) await this.writeRecord(record);
    });
  }

  private url(pathPart: string, query: Record<string, string> = {}): URL {
    const url = new URL(`${this.opts.location.endpoint.replace(/\/$/, '')}/${pathPart}`);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    return url;
  }

  private async get(url: URL): Promise<Response> {
    const response = await this.fetch(url);
    if (!response.ok) {
      const body = await response.text().catch(() => '');
      const code = /<Code>([^<]+)<\/Code>/.exec(body)?.[1];
      throw new Error(`GET ${url.pathname} from the object store answered ${response.status}${code ? ` ${code}` : ''}`);
    }
    return response;
  }

  private async list(): Promise<ListedObject[]> {
    const out: ListedObject[] = [];
    let token: string | undefined;
    do {
      const query: Record<string, string> = { 'list-type': '2', prefix: this.prefix, 'max-keys': '1000' };
      if (token) query['continuation-token'] = token;
      const response = await this.get(this.url(encodeURIComponent(this.bucket), query));
      const doc = parser.parse(await response.text()) as {
        ListBucketResult?: {
          Contents?: Array<{ Key?: string; Size?: string; ETag?: string; LastModified?: string }>;
          IsTruncated?: string;
          NextContinuationToken?: string;
        };
      };
      const result = doc.ListBucketResult;
      if (!result) throw new Error('the object store answered the listing with something that is not a ListBucketResult');
      for (const c of result.Contents ?? [])
        if (c.Key) out.push({ key: c.Key, size: Number(c.Size ?? 0), etag: etagOf(c.ETag), modified: c.LastModified && String(c.LastModified) });
      token = result.IsTruncated === 'true' ? result.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  /** The mirror's root (the folder of this source's bucket) and the record file in it. */
  private get mirrorRoot(): string {
    return path.join(this.opts.files.root, MIRROR_FOLDER, this.bucket);
  }

  private get recordFile(): string {
    return path.join(this.mirrorRoot, MIRROR_RECORD);
  }

  /**
   * Learn the bucket's owner: buckets are private to their owner, so the user this source reads as
   * owns it, and ListBuckets names that user (Owner ID) among whose buckets it must be. A bucket not
   * among them has no known owner (only admins see its images); a failed request keeps what was known.
   */
  private async learnOwner(): Promise<void> {
    let doc: { ListAllMyBucketsResult?: { Owner?: { ID?: string }; Buckets?: { Bucket?: { Name?: string } | Array<{ Name?: string }> } } };
    try {
      doc = parser.parse(await (await this.get(this.url(''))).text()) as typeof doc;
    } catch (err) {
      this.opts.logger.warn({ err }, 'could not learn the owner of the source bucket (ListBuckets)');
      return;
    }
    const result = doc.ListAllMyBucketsResult;
    const buckets = [result?.Buckets?.Bucket ?? []].flat();
    const owner = result?.Owner?.ID ? String(result.Owner.ID) : undefined;
    this.owner = owner && buckets.some((b) => b.Name === this.bucket) ? owner : undefined;
    if (!this.owner) this.opts.logger.warn({ bucket: this.bucket }, 'the source bucket is not among the buckets its user owns: only admins see its images');
  }

  private async syncOnce(): Promise<SyncResult> {
    await this.learnOwner();
    const listed = await this.list();
    const { files, service, logger } = this.opts;
    const pathOf = (key: string) => mirrorPathOf(this.bucket, key);
    const layout = await toHashedLayout(await this.readRecord(), { files, service, logger, mirrorRoot: this.mirrorRoot, pathOf });
    const previous = layout.record;
    const current = new Map<string, MirrorEntry>();
    const skipped: SyncResult['skipped'] = [];
    const changed: Array<{ path: string; object: ListedObject }> = [];
    let touched = false;
    const maxBytes = this.opts.maxObjectBytes ?? 50 * 2 ** 20;
    for (const object of listed) {
      // Folder markers are no objects to show; anything else not indexed is reported with the reason.
      if (object.key.endsWith('/')) continue;
      const unsupported = unsupportedReason(object.key);
      if (unsupported) {
        skipped.push({ key: object.key, reason: unsupported });
        continue;
      }
      if (object.size > maxBytes) {
        skipped.push({ key: object.key, reason: `larger than ${maxBytes} bytes` });
        continue;
      }
      const relative = mirrorPathOf(this.bucket, object.key);
      const target = this.opts.files.absolute(relative);
      const before = previous.get(relative);
      // Unchanged: same ETag, and the mirrored file still whole (downloads are not fsynced).
      if (before && before.etag === object.etag && (before.skipped !== undefined || (existsSync(target) && statSync(target).size === before.size))) {
        // Rewritten with the same bytes (LastModified only): the write may have set another ACL.
        touched ||= before.modified !== object.modified;
        if (before.modified !== object.modified) this.acls.name(object.key);
        current.set(relative, { ...before, modified: object.modified });
        if (before.skipped !== undefined) skipped.push({ key: object.key, reason: before.skipped });
        continue;
      }
      current.set(relative, { key: object.key, etag: '', size: object.size, modified: object.modified });
      changed.push({ path: relative, object });
    }
    // Pending downloads are recorded first, so that what a crash part-way left is still known as this
    // source's (dropped if the object goes meanwhile). Not fsynced: the final record of the round is.
    if (changed.length) await this.writeRecord(new Map([...previous, ...current]), { sync: false });
    // An object that cannot be fetched is reported and tried again next round; its old copy (if any) stays.
    const downloaded = new Set<string>();
    for (const { path: relative, object } of changed) {
      try {
        const etag = await this.download(object.key, this.opts.files.absolute(relative));
        const size = statSync(this.opts.files.absolute(relative)).size;
        current.set(relative, { key: object.key, etag: etag ?? object.etag, size, modified: object.modified });
        downloaded.add(relative);
      } catch (err) {
        const before = previous.get(relative);
        if (before) current.set(relative, before);
        else current.delete(relative);
        skipped.push({ key: object.key, reason: `not fetched (tried again next round): ${err instanceof Error ? err.message : String(err)}` });
      }
    }
    this.mirrored = new Map([...previous, ...current]); // keys of what this round indexes (readers: after it)
    // New and changed objects, and mirrored ones the index lacks (a crash, a fresh index directory).
    const encode = [...current]
      .filter(([p, e]) => e.skipped === undefined && (downloaded.has(p) || this.opts.service.index.idOf(p) === undefined))
      .map(([p]) => p);
    const indexed = await this.opts.service.indexPaths(encode, { replace: true });
    for (const failed of indexed.skipped) {
      const entry = current.get(failed.path)!;
      current.set(failed.path, { ...entry, skipped: failed.reason });
      skipped.push({ key: entry.key, reason: failed.reason });
    }
    // An object that changed into something undecodable takes its old vector with it.
    await this.opts.service.removePaths(indexed.skipped.map((f) => f.path));
    const gone = [...previous.keys()].filter((p) => !current.has(p));
    if (gone.length) {
      await this.opts.service.removePaths(gone);
      await Promise.all(gone.map((p) => fs.rm(this.opts.files.absolute(p), { force: true })));
    }
    // Who may read each image: the ACLs that may have changed (AclRefresh) and the bucket's public access
    // block; after indexing, so new images are searchable first (until then: owner rule alone).
    const plan = this.acls.plan(current, this.owner);
    const acls = await readReaders(current, plan.paths, async (key) => {
      const url = key === null ? this.url(encodeURIComponent(this.bucket), { publicAccessBlock: '' }) : this.url(this.objectPath(key), { acl: '' });
      const response = await this.fetch(url);
      return { status: response.status, body: await response.text() };
    });
    this.ignorePublic = acls.ignorePublic;
    for (const key of acls.failed.keys()) this.acls.name(key);
    if (acls.failed.size)
      this.opts.logger.warn({ error: [...acls.failed.values()].pop(), url: this.opts.location.url }, 'could not read the ACL of some source objects');
    if (changed.length || gone.length || indexed.skipped.length || acls.changed || touched || layout.migrated) await this.writeRecord(current);
    this.mirrored = current;
    return {
      listed: listed.length,
      downloaded: downloaded.size,
      encoded: encode.length,
      added: indexed.added,
      replaced: indexed.replaced,
      removed: gone.length,
      skipped,
      aclReads: acls.requests,
      aclFullPass: plan.full,
    };
  }

  /** The URL path of object `key` of this bucket. */
  private objectPath(key: string): string {
    return `${encodeURIComponent(this.bucket)}/${key.split('/').map(encodeURIComponent).join('/')}`;
  }

  private async writeRecord(entries: Map<string, MirrorEntry>, options: { sync?: boolean } = {}): Promise<void> {
    await fs.mkdir(this.mirrorRoot, { recursive: true });
    const body = JSON.stringify({ url: this.opts.location.url, paths: Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) });
    await writeFileAtomic(this.recordFile, body, options);
  }

  /** What an earlier round of this same source URL mirrored (nothing when missing or unreadable). */
  private async readRecord(): Promise<Map<string, MirrorEntry>> {
    const out = new Map<string, MirrorEntry>();
    try {
      const parsed = JSON.parse(await fs.readFile(this.recordFile, 'utf8')) as { url?: unknown; paths?: unknown };
      if (parsed.url !== this.opts.location.url || !parsed.paths || typeof parsed.paths !== 'object') return out;
      const mine = `${MIRROR_FOLDER}/${this.bucket}/`;
      for (const [p, e] of Object.entries(parsed.paths as Record<string, MirrorEntry>)) {
        if (!p.startsWith(mine) || p.split('/').includes('..') || p.includes('\0') || !e || typeof e.etag !== 'string' || typeof e.key !== 'string') continue;
        const skipped = typeof e.skipped === 'string' ? { skipped: e.skipped } : {};
        const readers = isObjectReaders(e.readers) ? { readers: e.readers } : {};
        const modified = typeof e.modified === 'string' ? { modified: e.modified } : {};
        out.set(p, { key: e.key, etag: e.etag, size: Number(e.size) || 0, ...modified, ...skipped, ...readers });
      }
    } catch {
      // no record yet
    }
    return out;
  }

  /** Fetch an object into the mirror; returns the ETag of what was fetched (when the store sends one). */
  private async download(key: string, target: string): Promise<string | undefined> {
    await fs.mkdir(path.dirname(target), { recursive: true });
    const url = this.url(this.objectPath(key));
    const response = await this.get(url);
    if (!response.body) throw new Error(`GET ${url.pathname}: empty response`);
    // No fsync per image: a file a crash left short fails the mirror's size check and is fetched again.
    await streamToFileAtomic(Readable.fromWeb(response.body as WebReadableStream), target, { sync: false });
    const etag = response.headers.get('etag');
    return etag ? etagOf(etag) : undefined;
  }
}
