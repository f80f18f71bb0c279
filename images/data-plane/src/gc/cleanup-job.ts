import type { Logger } from '../../../service-kit/src/index.js';
import type { Catalog } from '../catalog/catalog.js';
import type { BlobCollector } from './blob-collector.js';

/**
 * What the cleanup job needs from a backend that keeps blobs as files it can list (the filesystem
 * backend). Declared here, by its consumer; FsBackend satisfies it.
 */
export interface SweepableStore {
  readonly key: string;
  /** Temp files (bodies being written when the process died) older than `minAgeMs`; answers how many were removed. */
  removeStaleTempFiles(minAgeMs: number): Promise<number>;
  /** Multipart part files older than `maxAgeMs`. */
  removeStaleParts(maxAgeMs: number): Promise<number>;
  /** Every blob file with its modification time. */
  listBlobs(): AsyncIterable<{ locator: string; modifiedMs: number }>;
  delete(locator: string): Promise<void>;
}

export interface CleanupOptions {
  /**
   * A temp file or an unreferenced blob file younger than this may still belong to a request in
   * flight (a body being written, a blob renamed into place whose commit has not run yet), so it is
   * left alone. Default 1 hour. A commit that still comes later (its primary froze for longer) is
   * refused, never pointed at the deleted file (Catalog.fenceOrphans).
   */
  graceMs?: number;
  /** Part files older than this belong to uploads that expired unfinished. */
  partMaxAgeMs: number;
  /** How long an orphan's fence (swept_locators) is kept after it was recorded; default SWEPT_LOCATOR_RETENTION_MS. */
  sweptRetentionMs?: number;
  /** Candidates looked up in the catalog per query. */
  batchSize?: number;
  now?: () => number;
}

export interface CleanupReport {
  /** Temp files removed. */
  tempFiles: number;
  /** Part files of expired uploads removed. */
  staleParts: number;
  /** Blob rows at reference count 0 freed (bytes and row). */
  unreferencedBlobs: number;
  /** Blob files no row names (written, then the process died before or while committing) removed. */
  orphanFiles: number;
  /** Fences of orphans removed long ago forgotten (swept_locators rows). */
  sweptLocatorsPruned: number;
}

export const DEFAULT_ORPHAN_GRACE_MS = 3_600_000;

/**
 * How long the fence of a removed orphan is kept. It refuses a commit (or blob repair) of that locator
 * that resumes after the sweep: one whose statement has been in flight since before its file was a
 * grace old. Every commit's outcome is decided by a fence row in the outbox (ObjectCommit.outcome),
 * which the control plane keeps 7 days at the least (max(recycle retention, 7 days)), so no commit is
 * still undecided, let alone in flight, after that long; the locator fence is kept as long.
 */
export const SWEPT_LOCATOR_RETENTION_MS = 7 * 24 * 3_600_000;

/**
 * The data plane's repair job, run at start and then periodically. A crash (kill -9, OOM, node loss)
 * in the middle of a write can leave, besides nothing visible to clients:
 * - a temp file (the body was still streaming) → removed once older than the grace;
 * - a blob file renamed into place whose metadata commit never ran, or a deduplicated copy the
 *   process did not get to delete → no `blobs` row names it: removed once older than the grace,
 *   after a fence that refuses any commit of it still to come;
 * - a blob row at reference count 0 (the replaced object's blob was not freed yet, or was claimed
 *   FREEING and not finished) → freed by the BlobCollector, which re-claims FREEING rows;
 * - part files of multipart uploads that will never complete → removed after the upload TTL + a day;
 * - the fences of the orphans it removed (swept_locators) → forgotten SWEPT_LOCATOR_RETENTION_MS later.
 * The metadata itself needs no repair: an object, its blob references and its outbox event are
 * committed in one transaction, so a crash leaves either all of them or none.
 * Passes never overlap; a failing pass (database down) is logged and retried at the next tick.
 */
export class CleanupJob {
  private running: Promise<CleanupReport> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly graceMs: number;
  private readonly batchSize: number;
  private readonly sweptRetentionMs: number;
  private readonly now: () => number;

  constructor(
    private readonly catalog: Catalog,
    private readonly collector: BlobCollector,
    private readonly stores: SweepableStore[],
    private readonly logger: Logger,
    private readonly opts: CleanupOptions,
  ) {
    this.graceMs = opts.graceMs ?? DEFAULT_ORPHAN_GRACE_MS;
    this.batchSize = opts.batchSize ?? 1000;
    this.sweptRetentionMs = opts.sweptRetentionMs ?? SWEPT_LOCATOR_RETENTION_MS;
    this.now = opts.now ?? Date.now;
  }

  /** One pass (or the pass already running). */
  runOnce(): Promise<CleanupReport> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Run a pass now (in the background) and every `intervalMs`. */
  start(intervalMs: number): void {
    const tick = () => {
      this.runOnce().catch((err) => this.logger.warn({ err }, 'cleanup pass failed; will retry'));
    };
    tick();
    if (intervalMs > 0) {
      this.timer = setInterval(tick, intervalMs);
      this.timer.unref();
    }
  }

  /** Stop the schedule and wait for a pass in progress. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** The part of a pass that needs no database: stale temp and part files. */
  async removeStaleFiles(): Promise<Pick<CleanupReport, 'tempFiles' | 'staleParts'>> {
    let tempFiles = 0;
    let staleParts = 0;
    for (const store of this.stores) {
      tempFiles += await store.removeStaleTempFiles(this.graceMs);
      staleParts += await store.removeStaleParts(this.opts.partMaxAgeMs);
    }
    return { tempFiles, staleParts };
  }

  private async pass(): Promise<CleanupReport> {
    // Files first: they need no database, so they are cleaned even while it is unreachable.
    const report: CleanupReport = { ...(await this.removeStaleFiles()), unreferencedBlobs: 0, orphanFiles: 0, sweptLocatorsPruned: 0 };
    report.unreferencedBlobs = await this.collector.collect();
    const fencesBefore = new Date(this.now() - this.sweptRetentionMs);
    for (const store of this.stores) {
      report.orphanFiles += await this.removeOrphanFiles(store);
      // After this store's orphans are deleted (a failed delete fails the pass before this). Locators are
      // never reused, so the only commits a fence can still refuse are those in flight since before it.
      report.sweptLocatorsPruned += await this.catalog.pruneSweptLocators(store.key, fencesBefore);
    }
    if (report.tempFiles || report.staleParts || report.unreferencedBlobs || report.orphanFiles || report.sweptLocatorsPruned) {
      this.logger.info(report, 'cleanup removed leftovers');
    }
    return report;
  }

  private async removeOrphanFiles(store: SweepableStore): Promise<number> {
    let removed = 0;
    let batch: string[] = [];
    const flush = async () => {
      for (const locator of await this.catalog.fenceOrphans(store.key, batch)) {
        await store.delete(locator);
        removed++;
      }
      batch = [];
    };
    const cutoff = this.now() - this.graceMs;
    for await (const blob of store.listBlobs()) {
      if (blob.modifiedMs > cutoff) continue;
      batch.push(blob.locator);
      if (batch.length >= this.batchSize) await flush();
    }
    if (batch.length) await flush();
    if (removed) this.logger.warn({ backend: store.key, removed }, 'removed blob files no metadata refers to (left by a crash)');
    return removed;
  }
}
