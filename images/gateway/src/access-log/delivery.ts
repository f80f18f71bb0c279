import { Readable } from 'node:stream';
import { pooledRandomBytes, registeredCounter, type Counter, type Logger, type Registry } from '../../../service-kit/src/index.js';
import type { BucketInfo, LoggingRule, ObjectLayer } from '../../../object-model/src/index.js';

/** How log lines are gathered before they are written (STRATA_ACCESS_LOG_*). */
export interface AccessLogSettings {
  /** A target's lines are written once the first of them has waited this long, ms (radosgw's ObjectRollTime). */
  flushMs: number;
  /** A target's lines are written as soon as this many wait. */
  flushLines: number;
  /** The most lines held in memory, all targets together (being written included): more are dropped and counted. */
  bufferLines: number;
}

/** How long a graceful stop waits for the last log writes. */
const CLOSE_WAIT_MS = 10_000;

export const DEFAULT_ACCESS_LOG_SETTINGS: AccessLogSettings = { flushMs: 60_000, flushLines: 1000, bufferLines: 20_000 };

/** Where a batch goes, and for whom: the source bucket's owner, who must still own the target when it is written. */
interface Batch {
  source: string;
  owner: string;
  rule: LoggingRule;
  /** The day the batch's records belong to (PartitionedPrefix by EventTime), else undefined. */
  eventDay?: Date;
  lines: string[];
  /** When its first line came (Date.now()). */
  since: number;
}

const two = (n: number) => String(n).padStart(2, '0');
const stamp = (t: Date) =>
  `${t.getUTCFullYear()}-${two(t.getUTCMonth() + 1)}-${two(t.getUTCDate())}-${two(t.getUTCHours())}-${two(t.getUTCMinutes())}-${two(t.getUTCSeconds())}`;

/**
 * A log object's key, as S3 names them: SimplePrefix `<prefix>YYYY-mm-DD-HH-MM-SS-<unique>`, PartitionedPrefix
 * `<prefix><owner>/<region>/<bucket>/YYYY/mm/DD/YYYY-mm-DD-HH-MM-SS-<unique>` (the day of the records or of the delivery).
 */
export function logObjectKey(batch: Pick<Batch, 'source' | 'owner' | 'rule' | 'eventDay'>, region: string, now: Date, unique: string): string {
  const name = `${stamp(now)}-${unique}`;
  if (!batch.rule.partitionDateSource) return `${batch.rule.targetPrefix}${name}`;
  const day = batch.eventDay ?? now;
  const path = `${day.getUTCFullYear()}/${two(day.getUTCMonth() + 1)}/${two(day.getUTCDate())}`;
  return `${batch.rule.targetPrefix}${batch.owner}/${region}/${batch.source}/${path}/${name}`;
}

/**
 * Server access-log delivery, best effort as S3's: lines are gathered per target (bucket, prefix, source and,
 * for PartitionedPrefix by EventTime, day) and written as one log object each through the object layer — once the
 * batch's first line has waited `flushMs` (a timer looks a few times per `flushMs`, at least once a second), once
 * `flushLines` wait, and on close. Memory is bounded: past `bufferLines` a line is dropped and
 * counted. A target that is gone, or no longer the source owner's (a name deleted and taken by another account),
 * gets nothing: its lines are dropped and counted, and no client request ever waits for or fails by a write.
 * These writes go to the object layer directly, so they are never logged themselves.
 */
export class AccessLogDelivery {
  private batches = new Map<string, Batch>();
  private buffered = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;
  private readonly lines: Counter<'outcome'>;

  constructor(
    private readonly objects: Pick<ObjectLayer, 'putObject'>,
    /** The target bucket's current record (NoSuchBucket when there is none). */
    private readonly lookupBucket: (name: string) => Promise<BucketInfo>,
    private readonly region: string,
    private readonly settings: AccessLogSettings,
    private readonly logger: Logger,
    registry: Registry,
  ) {
    this.lines = registeredCounter(
      registry,
      'strata_gateway_access_log_lines_total',
      'Server access-log lines: written to their target, dropped because the buffer was full, or undeliverable (target gone, not the owner, write failed)',
      ['outcome'],
    );
    for (const outcome of ['written', 'buffer_full', 'undeliverable']) this.lines.inc({ outcome }, 0);
    this.timer = setInterval(() => this.writeDue(), Math.max(50, Math.min(1000, settings.flushMs / 4)));
    this.timer.unref();
  }

  /** Queue one line of `source`'s log (its record as the request found it) for the target its rule names. */
  record(source: BucketInfo, rule: LoggingRule, line: string, eventTime: Date): void {
    if (this.buffered >= this.settings.bufferLines) {
      this.lines.inc({ outcome: 'buffer_full' });
      return;
    }
    const eventDay =
      rule.partitionDateSource === 'EventTime' ? new Date(Date.UTC(eventTime.getUTCFullYear(), eventTime.getUTCMonth(), eventTime.getUTCDate())) : undefined;
    const id = [source.name, source.owner, rule.targetBucket, rule.targetPrefix, rule.partitionDateSource ?? '', eventDay?.getTime() ?? ''].join('\n');
    let batch = this.batches.get(id);
    if (!batch) this.batches.set(id, (batch = { source: source.name, owner: source.owner, rule, eventDay, lines: [], since: Date.now() }));
    batch.lines.push(line);
    this.buffered++;
    if (batch.lines.length >= this.settings.flushLines) {
      this.batches.delete(id);
      this.track(this.write(batch));
    }
  }

  /** Write the batches whose first line has waited flushMs. */
  private writeDue(): void {
    const due = Date.now() - this.settings.flushMs;
    for (const [id, batch] of this.batches) {
      if (batch.since > due) continue;
      this.batches.delete(id);
      this.track(this.write(batch));
    }
  }

  /** Write every waiting batch now; resolves once they (and the writes already under way) are done. */
  async flush(): Promise<void> {
    const batches = [...this.batches.values()];
    this.batches = new Map();
    for (const batch of batches) this.track(this.write(batch));
    await Promise.all([...this.inFlight]);
  }

  /** Stop the timer and write what waits (graceful shutdown), waiting for the writes `waitMs` at most: a stuck target does not hold the stop. */
  async close(waitMs = CLOSE_WAIT_MS): Promise<void> {
    clearInterval(this.timer);
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), waitMs)));
    if (await Promise.race([this.flush().then(() => false), gaveUp]))
      this.logger.warn({ waitMs, lines: this.buffered }, 'access-log lines still being written at shutdown: not waited for');
    clearTimeout(timer);
  }

  private track(write: Promise<void>): void {
    this.inFlight.add(write);
    void write.finally(() => this.inFlight.delete(write));
  }

  private async write(batch: Batch): Promise<void> {
    const count = batch.lines.length;
    try {
      const target = await this.lookupBucket(batch.rule.targetBucket);
      if (target.owner !== batch.owner) throw new Error('the target bucket belongs to another account');
      const body = Buffer.from(batch.lines.join('\n') + '\n');
      const key = logObjectKey(batch, this.region, new Date(), pooledRandomBytes(8).toString('hex').toUpperCase());
      await this.objects.putObject(
        target.name,
        key,
        { contentLength: body.length, contentType: 'text/plain', owner: target.owner, userMetadata: {}, bucketRecord: target },
        Readable.from([body]),
      );
      this.lines.inc({ outcome: 'written' }, count);
    } catch (err) {
      this.lines.inc({ outcome: 'undeliverable' }, count);
      this.logger.warn({ source: batch.source, target: batch.rule.targetBucket, lines: count, err: (err as Error).message }, 'access-log lines not delivered');
    } finally {
      this.buffered -= count;
    }
  }
}
