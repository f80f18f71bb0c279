import { randomUUID } from 'node:crypto';
import { isDatabaseUnavailable, type Logger, type StringCache } from '../../../service-kit/src/index.js';
import { S3Error, type AdminJob } from '../../../object-model/src/index.js';
import { cacheKeys } from '../cache/cache-keys.js';

/** Finished jobs kept for their status readers; older ones are forgotten first. */
const FINISHED_KEPT = 100;
/** A running job's shared record lives this long unless its replica renews it (every third of it). */
export const RUNNING_RECORD_TTL_S = 60;
/** A finished job's shared record: its status readers (the purge CronJob, admins) have a day to read it. */
export const FINISHED_RECORD_TTL_S = 24 * 3600;

/**
 * The control plane's admin jobs: `start` runs the work in the background and answers the job at once;
 * one job of a kind runs at a time in a replica, and starting a kind that is running answers the
 * running job. Each job's record is also written to the stack's shared cache (Redis), so that any
 * replica answers its status (the purge CronJob and the gateway reach a random replica through the
 * Service). A running record expires unless its replica renews it: a replica that dies takes its jobs
 * with it, and their status then answers NoSuchJob (a caller waiting for one reports failure), as a
 * restart of a single replica always did. A replica asked for a kind another one runs answers that
 * job (the running record of each kind names it). Two replicas asked at the same instant may still
 * both run a kind (the marker is not a lock); the purge tolerates that (batches claimed SKIP LOCKED).
 */
export class AdminJobs {
  private readonly jobs = new Map<string, AdminJob>();

  constructor(
    private readonly clock: () => Date,
    private readonly logger: Logger,
    private readonly shared?: StringCache,
  ) {}

  async start(kind: string, work: () => Promise<unknown>): Promise<AdminJob> {
    for (const job of this.jobs.values()) if (job.kind === kind && job.state === 'running') return job;
    const elsewhere = await this.runningElsewhere(kind);
    if (elsewhere) return elsewhere;
    const job: AdminJob = { id: randomUUID(), kind, state: 'running', startedAt: this.clock().toISOString() };
    this.jobs.set(job.id, job);
    await this.publish(job);
    const renew = setInterval(() => void this.publish(job), (RUNNING_RECORD_TTL_S * 1000) / 3);
    renew.unref();
    work()
      .then(
        (result) => this.finish(job, { state: 'succeeded', result }),
        (err: unknown) => {
          this.logger.error({ err, job: job.id, kind }, 'admin job failed');
          const error =
            err instanceof S3Error
              ? { code: err.code, message: err.message }
              : isDatabaseUnavailable(err)
                ? { code: 'ServiceUnavailable', message: 'The metadata database is unavailable; run the job again later.' }
                : { code: 'InternalError', message: 'The job failed; see the control plane log.' };
          return this.finish(job, { state: 'failed', error });
        },
      )
      .finally(() => clearInterval(renew));
    return job;
  }

  /** The job, from this replica's memory or the shared record another replica wrote. */
  async get(id: string): Promise<AdminJob> {
    const job = this.jobs.get(id) ?? (await this.read(id));
    if (!job) throw new S3Error('NoSuchJob');
    return job;
  }

  private async finish(job: AdminJob, outcome: Pick<AdminJob, 'state' | 'result' | 'error'>): Promise<void> {
    Object.assign(job, outcome, { finishedAt: this.clock().toISOString() });
    const finished = [...this.jobs.values()].filter((j) => j.state !== 'running');
    for (const old of finished.slice(0, Math.max(0, finished.length - FINISHED_KEPT))) this.jobs.delete(old.id);
    await this.publish(job);
  }

  /**
   * The job of this kind another replica runs (its record names it while it runs), if any. Best effort,
   * as the marker itself: a cache that cannot answer lets the job start here (the purge tolerates two).
   */
  private async runningElsewhere(kind: string): Promise<AdminJob | undefined> {
    try {
      const id = await this.shared?.get(cacheKeys.runningAdminJob(kind));
      const job = id ? await this.read(id) : undefined;
      return job?.state === 'running' ? job : undefined;
    } catch (err) {
      this.logger.warn({ err, kind }, 'admin job markers unreadable; the job starts on this replica');
      return undefined;
    }
  }

  /** Best effort: without the cache only this replica answers the job's status. */
  private async publish(job: AdminJob): Promise<void> {
    if (!this.shared) return;
    // From the job's state as it is now: a renewal racing the finish never shortens a finished record.
    const ttlSeconds = job.state === 'running' ? RUNNING_RECORD_TTL_S : FINISHED_RECORD_TTL_S;
    try {
      await this.shared.set(cacheKeys.adminJob(job.id), JSON.stringify(job), ttlSeconds);
      if (job.state === 'running') await this.shared.set(cacheKeys.runningAdminJob(job.kind), job.id, ttlSeconds);
    } catch (err) {
      this.logger.warn({ err, job: job.id }, 'admin job record not shared; only this replica answers its status');
    }
  }

  private async read(id: string): Promise<AdminJob | undefined> {
    if (!this.shared) return undefined;
    const text = await this.shared.get(cacheKeys.adminJob(id));
    return text ? (JSON.parse(text) as AdminJob) : undefined;
  }
}
