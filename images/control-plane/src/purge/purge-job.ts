import cron, { type ScheduledTask } from 'node-cron';
import type { Counter, Logger } from '../../../service-kit/src/index.js';
import type { MetadataStore } from '../metadata/store.js';
import type { BlobCollector } from './data-plane-gc.js';
import { runLifecycle, type LifecycleResult, type UploadExpirer } from './lifecycle-job.js';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface PurgeDeps {
  store: MetadataStore;
  collector: BlobCollector;
  retentionDays: number;
  logger: Logger;
  purgedTotal: Counter;
  /** By `action`: `expire` (objects), `abort` (multipart uploads). */
  lifecycleTotal?: Counter<'action'>;
  /** Nudge the outbox relay: the purge committed object.purged events. */
  kickOutbox?: () => void;
  /** Aborts multipart uploads that a bucket's lifecycle rule has expired (the data plane keeps them). */
  uploads: UploadExpirer;
  /** After an object is expired by a lifecycle rule: cached reads of it must end. */
  invalidate: (bucket: string, key: string) => Promise<void>;
}

export interface PurgeRunResult extends LifecycleResult {
  purged: number;
  freedBlobs: number;
}

/**
 * The daily job. First applies the buckets' lifecycle rules (expired objects go to the recycle bin,
 * expired multipart uploads are aborted), then empties the recycle bin of objects recycled more than
 * `retentionDays` ago (→ DELETED), then has the data plane free the bytes of blobs that no NORMAL or
 * RECYCLED object references any more.
 * If freeing fails the blobs stay at reference count 0 and the data plane's periodic sweep frees them.
 * Sent outbox rows, processed event ids and DELETED versions older than the retention are pruned too.
 */
export async function runPurge(deps: PurgeDeps, now: Date): Promise<PurgeRunResult> {
  const lifecycle = await runLifecycle(deps, now);
  deps.lifecycleTotal?.inc({ action: 'expire' }, lifecycle.expiredObjects);
  deps.lifecycleTotal?.inc({ action: 'abort' }, lifecycle.abortedUploads);
  if (lifecycle.expiredObjects > 0) deps.kickOutbox?.();
  const cutoff = new Date(now.getTime() - deps.retentionDays * DAY_MS);
  const { purged, unreferencedBlobIds } = await deps.store.recycleBin.purge(cutoff, now);
  if (purged > 0) deps.kickOutbox?.();
  let freedBlobs = 0;
  try {
    freedBlobs = await deps.collector.collect(unreferencedBlobIds);
  } catch (err) {
    deps.logger.warn({ err, blobs: unreferencedBlobIds.length }, 'freeing blob bytes failed; the data plane sweep will retry');
  }
  // The event logs and DELETED versions are kept as long as the recycle bin: no redelivery is that late.
  const keptSince = new Date(now.getTime() - Math.max(deps.retentionDays, 7) * DAY_MS);
  const pruned = await deps.store.inbox.pruneLogs(keptSince);
  const prunedVersions = await deps.store.recycleBin.pruneDeletedVersions(keptSince);
  deps.purgedTotal.inc(purged);
  deps.logger.info({ purged, freedBlobs, pruned: { ...pruned, deletedVersions: prunedVersions }, cutoff: cutoff.toISOString() }, 'recycle bin purged');
  return { purged, freedBlobs, ...lifecycle };
}

/** The daily 03:00 purge (standalone mode; under the operator a CronJob calls POST /internal/purge). */
export function schedulePurge(expression: string, deps: PurgeDeps, clock: () => Date): ScheduledTask {
  return cron.schedule(expression, async () => {
    try {
      await runPurge(deps, clock());
    } catch (err) {
      deps.logger.error({ err }, 'scheduled purge failed');
    }
  });
}
