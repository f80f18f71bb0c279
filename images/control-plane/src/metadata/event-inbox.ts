import { v7 as uuidv7 } from 'uuid';
import type { SqlClient, SqlExecutor } from '../../../service-kit/src/index.js';
import type { EventInbox, StrataEvent } from './store.js';

/** Write an event to the outbox inside the caller's transaction; the data plane's relay publishes it. */
export async function insertOutboxEvent(tx: SqlExecutor, type: string, payload: Record<string, unknown>, now: Date): Promise<string> {
  const id = uuidv7();
  await tx.query('INSERT INTO outbox (event_id, type, payload, created_at) VALUES ($1, $2, $3, $4)', [id, type, JSON.stringify(payload), now]);
  return id;
}

/** How an object event moves its bucket's counts; undefined for the other events. */
function objectEventDelta(event: StrataEvent): { objects: number; bytes: number } | undefined {
  const p = event.payload as { size?: number; replacedSize?: number | null };
  const size = Number(p.size ?? 0);
  switch (event.type) {
    case 'object.created':
      return p.replacedSize === null || p.replacedSize === undefined ? { objects: 1, bytes: size } : { objects: 0, bytes: size - Number(p.replacedSize) };
    case 'object.recycled':
      return { objects: -1, bytes: -size };
    case 'object.restored':
      return { objects: 1, bytes: size };
    default:
      return undefined;
  }
}

/** The event's bucket id; null when its payload has none. */
function bucketIdOf(event: StrataEvent): number | null {
  const bucketId = Number((event.payload as { bucketId?: number }).bucketId);
  return Number.isInteger(bucketId) ? bucketId : null;
}

/** The processed-event table (each event applied once) and the outbox's sent rows. */
export class SqlEventInbox implements EventInbox {
  constructor(private readonly sql: SqlClient) {}

  async applyOnce(events: StrataEvent[]): Promise<boolean[]> {
    // Every event but bucket.deleted goes into ONE statement; bucket.deleted, whose side effect
    // removes a counts row that the others may move, is applied after it, one by one. An id twice in
    // the batch counts once.
    const applied: boolean[] = events.map(() => false);
    const seen = new Set<string>();
    const together: number[] = [];
    const alone: number[] = [];
    events.forEach((event, i) => {
      if (seen.has(event.id)) return; // a duplicate within the batch: applied at most once, below
      seen.add(event.id);
      (event.type === 'bucket.deleted' ? alone : together).push(i);
    });
    if (together.length > 0) {
      const fresh = await this.applyCounted(together.map((i) => events[i]!));
      for (const i of together) applied[i] = fresh.has(events[i]!.id);
    }
    for (const i of alone) applied[i] = await this.applyBucketDeleted(events[i]!);
    return applied;
  }

  /**
   * Events whose side effect is at most a move of their bucket's counts, in ONE statement (no
   * BEGIN/COMMIT round trips, one commit for the batch): every event id recorded (ON CONFLICT DO
   * NOTHING keeps a redelivered one out), and each bucket's counts moved once by the sum of its fresh
   * events — a hot bucket's row is updated once per batch instead of once per event. Answers the
   * fresh ids.
   */
  private async applyCounted(events: StrataEvent[]): Promise<Set<string>> {
    const cols = {
      id: [] as string[],
      type: [] as string[],
      bucket: [] as Array<number | null>,
      objects: [] as Array<number | null>,
      bytes: [] as Array<number | null>,
    };
    for (const event of events) {
      const delta = objectEventDelta(event);
      cols.id.push(event.id);
      cols.type.push(event.type);
      cols.bucket.push(delta ? bucketIdOf(event) : null);
      cols.objects.push(delta ? delta.objects : null);
      cols.bytes.push(delta ? delta.bytes : null);
    }
    const res = await this.sql.query<{ event_id: string }>(
      `WITH ev AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS e(event_id, type, bucket_id, objects, bytes)),
       fresh AS (INSERT INTO processed_events (event_id, type) SELECT event_id, type FROM ev ORDER BY event_id ON CONFLICT DO NOTHING RETURNING event_id),
       delta AS (SELECT ev.bucket_id, sum(ev.objects)::bigint AS objects, sum(ev.bytes)::bigint AS bytes FROM ev JOIN fresh ON fresh.event_id = ev.event_id
         WHERE ev.bucket_id IS NOT NULL GROUP BY ev.bucket_id),
       bump AS (INSERT INTO bucket_stats (bucket_id, object_count, bytes)
         SELECT bucket_id, objects, bytes FROM delta WHERE EXISTS (SELECT 1 FROM buckets WHERE id = delta.bucket_id) ORDER BY bucket_id
         ON CONFLICT (bucket_id) DO UPDATE SET object_count = bucket_stats.object_count + EXCLUDED.object_count, bytes = bucket_stats.bytes + EXCLUDED.bytes)
       SELECT event_id FROM fresh`,
      [cols.id, cols.type, cols.bucket, cols.objects, cols.bytes],
    );
    return new Set(res.rows.map((r) => r.event_id));
  }

  /** bucket.deleted: its id recorded and the bucket's counts row gone together, in one statement. */
  private async applyBucketDeleted(event: StrataEvent): Promise<boolean> {
    const res = await this.sql.query(
      `WITH fresh AS (INSERT INTO processed_events (event_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING event_id),
       gone AS (DELETE FROM bucket_stats WHERE bucket_id = $3::bigint AND EXISTS (SELECT 1 FROM fresh))
       SELECT event_id FROM fresh`,
      [event.id, event.type, bucketIdOf(event)],
    );
    return res.rows.length > 0;
  }

  async pruneLogs(cutoff: Date): Promise<{ outbox: number; processed: number }> {
    const outbox = await this.sql.query('DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < $1', [cutoff]);
    const processed = await this.sql.query('DELETE FROM processed_events WHERE processed_at < $1', [cutoff]);
    return { outbox: outbox.rowCount, processed: processed.rowCount };
  }
}
