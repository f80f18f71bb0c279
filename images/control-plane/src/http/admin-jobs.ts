import { randomUUID } from 'node:crypto';
import { isDatabaseUnavailable, type Logger } from '../../../service-kit/src/index.js';
import { S3Error, type AdminJob } from '../../../object-model/src/index.js';

/** Finished jobs kept for their status readers; older ones are forgotten first. */
const FINISHED_KEPT = 100;

/**
 * The control plane's admin jobs, in its memory (it runs as one replica): `start` runs the work in the
 * background and answers the job at once; one job of a kind runs at a time, and starting a kind that
 * is running answers the running job. A restart forgets every job (its status then answers NoSuchJob,
 * and a caller waiting for it reports failure).
 */
export class AdminJobs {
  private readonly jobs = new Map<string, AdminJob>();

  constructor(
    private readonly clock: () => Date,
    private readonly logger: Logger,
  ) {}

  start(kind: string, work: () => Promise<unknown>): AdminJob {
    for (const job of this.jobs.values()) if (job.kind === kind && job.state === 'running') return job;
    const job: AdminJob = { id: randomUUID(), kind, state: 'running', startedAt: this.clock().toISOString() };
    this.jobs.set(job.id, job);
    work().then(
      (result) => this.finish(job, { state: 'succeeded', result }),
      (err: unknown) => {
        this.logger.error({ err, job: job.id, kind }, 'admin job failed');
        const error =
          err instanceof S3Error
            ? { code: err.code, message: err.message }
            : isDatabaseUnavailable(err)
              ? { code: 'ServiceUnavailable', message: 'The metadata database is unavailable; run the job again later.' }
              : { code: 'InternalError', message: 'The job failed; see the control plane log.' };
        this.finish(job, { state: 'failed', error });
      },
    );
    return job;
  }

  get(id: string): AdminJob {
    const job = this.jobs.get(id);
    if (!job) throw new S3Error('NoSuchJob');
    return job;
  }

  private finish(job: AdminJob, outcome: Pick<AdminJob, 'state' | 'result' | 'error'>): void {
    Object.assign(job, outcome, { finishedAt: this.clock().toISOString() });
    const finished = [...this.jobs.values()].filter((j) => j.state !== 'running');
    for (const old of finished.slice(0, Math.max(0, finished.length - FINISHED_KEPT))) this.jobs.delete(old.id);
  }
}
