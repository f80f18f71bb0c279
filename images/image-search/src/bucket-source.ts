// Images from a bucket prefix of Strata's object store (IMAGE_SEARCH_SOURCE_S3_URL=s3://bucket/prefix):
// the image objects under the prefix are mirrored into the image directory (key minus prefix = path)
// and indexed, at start and then every IMAGE_SEARCH_SOURCE_SYNC_SECONDS, so that objects created in
// the bucket reach the index without a call to /api/index/add. Objects that leave the prefix (deleted
// to the recycle bin, purged) leave the index and the mirror at the next round: the source records
// which paths it mirrored (MIRROR_RECORD in the image directory), so files that came from elsewhere
// (uploads, a mounted directory) are never touched. Listing and downloads are ordinary S3 requests
// (ListObjectsV2, GET) signed with SigV4, so any S3 API works, Strata's gateway included.
import { existsSync, promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { XMLParser } from 'fast-xml-parser';
import type { Logger } from '../../service-kit/src/index.js';
import { signedHeaders, type S3Location } from './clip/model-files.js';
import { IMAGE_EXTENSIONS, type ImageFiles } from './image-files.js';
import { streamToFileAtomic } from './atomic-file.js';
import type { SearchService } from './search-service.js';

export interface BucketSourceOptions {
  location: S3Location;
  files: ImageFiles;
  service: SearchService;
  logger: Logger;
  /** Largest object mirrored (bigger ones are skipped). */
  maxObjectBytes?: number;
}

export interface SyncResult {
  listed: number;
  downloaded: number;
  added: number;
  /** Mirrored images whose objects are gone from the prefix: dropped from the index and the mirror. */
  removed: number;
  skipped: Array<{ key: string; reason: string }>;
}

export interface BucketSourceStatus {
  kind: 'bucket';
  url: string;
  syncing: boolean;
  last_sync: (SyncResult & { finished_at: string }) | null;
  last_error: string | null;
  /** Whether object events (created, recycled, restored) trigger syncs, and how many matching ones arrived. */
  events: 'none' | 'subscribed';
  events_received: number;
}

interface ListedObject {
  key: string;
  size: number;
}

/** The paths this source mirrored (JSON, in the image directory; not an image name, so never indexed). */
export const MIRROR_RECORD = '.strata-bucket-source.json';

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === 'Contents' });

export class BucketSource {
  private readonly bucket: string;
  private readonly prefix: string;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<SyncResult> | null = null;
  private last: BucketSourceStatus['last_sync'] = null;
  private lastError: string | null = null;
  private pending = false;
  events: 'none' | 'subscribed' = 'none';
  private eventsSeen = 0;

  constructor(private readonly opts: BucketSourceOptions) {
    const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(opts.location.url);
    if (!match) throw new Error(`IMAGE_SEARCH_SOURCE_S3_URL must look like s3://bucket/prefix, got ${opts.location.url}`);
    this.bucket = match[1];
    this.prefix = match[2] && !match[2].endsWith('/') ? `${match[2]}/` : match[2];
  }

  status(): BucketSourceStatus {
    return {
      kind: 'bucket',
      url: this.opts.location.url,
      syncing: this.running !== null,
      last_sync: this.last,
      last_error: this.lastError,
      events: this.events,
      events_received: this.eventsSeen,
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
    await this.running?.catch(() => undefined);
  }

  /** An object event (created, recycled, restored): sync when it is about this source. */
  onObjectEvent(bucket: unknown, key: unknown): void {
    if (!this.matches(bucket, key)) return;
    this.eventsSeen++;
    this.requestSync();
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
      this.running = this.syncOnce().then(
        (result) => {
          this.last = { ...result, finished_at: new Date().toISOString() };
          this.lastError = null;
          this.running = null;
          if (result.downloaded || result.added || result.removed) this.opts.logger.info({ ...result, skipped: result.skipped.length }, 'image bucket synced');
          return result;
        },
        (err: unknown) => {
          this.lastError = err instanceof Error ? err.message : String(err);
          this.running = null;
          this.opts.logger.warn({ error: this.lastError, url: this.opts.location.url }, 'image bucket sync failed');
          throw err;
        },
      );
    }
    return this.running;
  }

  private url(pathPart: string, query: Record<string, string> = {}): URL {
    const url = new URL(`${this.opts.location.endpoint.replace(/\/$/, '')}/${pathPart}`);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    return url;
  }

  private async get(url: URL): Promise<Response> {
    const response = await fetch(url, { headers: signedHeaders(url, this.opts.location) });
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
        ListBucketResult?: { Contents?: Array<{ Key?: string; Size?: string }>; IsTruncated?: string; NextContinuationToken?: string };
      };
      const result = doc.ListBucketResult;
      if (!result) throw new Error('the object store answered the listing with something that is not a ListBucketResult');
      for (const c of result.Contents ?? []) if (c.Key) out.push({ key: c.Key, size: Number(c.Size ?? 0) });
      token = result.IsTruncated === 'true' ? result.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  private async syncOnce(): Promise<SyncResult> {
    const listed = await this.list();
    const skipped: SyncResult['skipped'] = [];
    const mirrored: string[] = [];
    let downloaded = 0;
    for (const object of listed) {
      const relative = object.key.slice(this.prefix.length);
      if (!relative || relative.endsWith('/')) continue;
      if (!IMAGE_EXTENSIONS.has(path.extname(relative).toLowerCase())) continue;
      const target = path.resolve(this.opts.files.root, relative);
      if (!target.startsWith(this.opts.files.root + path.sep) || relative.split('/').includes('..')) {
        skipped.push({ key: object.key, reason: 'key leads outside the image directory' });
        continue;
      }
      if (object.size > (this.opts.maxObjectBytes ?? 50 * 2 ** 20)) {
        skipped.push({ key: object.key, reason: `larger than ${this.opts.maxObjectBytes ?? 50 * 2 ** 20} bytes` });
        continue;
      }
      const normalized = path.relative(this.opts.files.root, target).split(path.sep).join('/');
      if (!existsSync(target) || statSync(target).size !== object.size) {
        await this.download(object.key, target);
        downloaded++;
      }
      mirrored.push(normalized);
    }
    const added = await this.opts.service.indexPaths(mirrored);
    const removed = await this.dropVanished(new Set(mirrored));
    return { listed: listed.length, downloaded, added, removed, skipped };
  }

  /**
   * Remove from the index and the mirror what an earlier round mirrored and the complete listing no
   * longer has, then record the current set. A listing that failed part-way never gets here.
   */
  private async dropVanished(current: Set<string>): Promise<number> {
    const record = path.join(this.opts.files.root, MIRROR_RECORD);
    const previous = await this.readRecord(record);
    const gone = previous.filter((p) => !current.has(p));
    if (gone.length) {
      await this.opts.service.removePaths(gone);
      await Promise.all(gone.map((p) => fs.rm(this.opts.files.absolute(p), { force: true })));
    }
    const tmp = `${record}.${process.pid}.tmp`;
    await fs.mkdir(this.opts.files.root, { recursive: true });
    await fs.writeFile(tmp, JSON.stringify({ url: this.opts.location.url, paths: [...current].sort() }));
    await fs.rename(tmp, record);
    return gone.length;
  }

  /** The paths recorded by an earlier round of this same source URL (none when missing or unreadable). */
  private async readRecord(file: string): Promise<string[]> {
    try {
      const parsed = JSON.parse(await fs.readFile(file, 'utf8')) as { url?: unknown; paths?: unknown };
      if (parsed.url !== this.opts.location.url || !Array.isArray(parsed.paths)) return [];
      return parsed.paths.filter((p): p is string => typeof p === 'string' && !p.split('/').includes('..'));
    } catch {
      return [];
    }
  }

  private async download(key: string, target: string): Promise<void> {
    await fs.mkdir(path.dirname(target), { recursive: true });
    const url = this.url(`${encodeURIComponent(this.bucket)}/${key.split('/').map(encodeURIComponent).join('/')}`);
    const response = await this.get(url);
    if (!response.body) throw new Error(`GET ${url.pathname}: empty response`);
    // No fsync per image: a file a crash left short fails the mirror's size check and is fetched again.
    await streamToFileAtomic(Readable.fromWeb(response.body as WebReadableStream), target, { sync: false });
  }
}
