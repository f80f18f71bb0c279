import { DatabaseUnavailableError, isDatabaseUnavailable, isUniqueViolation, uuidV7, type SqlClient } from '../../../service-kit/src/index.js';
import { S3Error, checkWriteConditions, splitEncryption, type StoredHeaders, type Tag, type WriteConditions } from '../../../object-model/src/index.js';
import type { BucketRef, ObjectMeta } from './catalog.js';
import { GroupCommit } from './group-commit.js';

/** The bytes the new object points at: a blob just written, or one already stored. */
export type BlobSource =
  | {
      kind: 'new';
      backendKey: string;
      backend: unknown;
      locator: string;
      md5: string | null;
      size: number;
      /** An inline blob's bytes (StoredBlob.inline). */ data?: Buffer;
    }
  | { kind: 'existing'; blobId: number };

export interface CommitRequest {
  bucket: BucketRef;
  key: string;
  owner: string;
  blob: BlobSource;
  etag: string;
  md5: string | null;
  size: number;
  contentType: string;
  userMetadata: Record<string, string>;
  /** The new version's tags (x-amz-tagging); none when absent or empty. */
  tags?: Tag[];
  /** The new version's stored headers; none when absent. */
  headers?: StoredHeaders;
  /** A multipart object's part sizes in part order; none for an object uploaded whole. */
  partSizes?: number[];
  /** Its parts' checksums in part order, when they have them. */
  partChecksums?: string[];
  conditions?: WriteConditions;
  now: Date;
}

export interface CommitResult {
  meta: ObjectMeta;
  /**
   * False when a new blob's content was already stored (`sharedBlob`): the caller deletes the bytes it
   * wrote once that blob's bytes are known to be there (else they repair it, see Catalog.repairBlob).
   */
  newBlobKept: boolean;
  /** The stored blob a new blob's content was deduplicated onto (when newBlobKept is false). */
  sharedBlob?: { id: number; locator: string };
  /** Blobs whose last reference went away (the replaced object's): free their bytes. */
  unreferencedBlobIds: number[];
}

/** The existing blob was being freed between lookup and commit. */
export class BlobGoneError extends Error {}

/**
 * A commit whose outcome is unknown: the connection failed or timed out once the statement may have
 * reached the server, and deciding it (ObjectCommit.outcome) failed as well. The server may still
 * commit it (a frozen primary that resumes), so the bytes it names must stay until `eventId` is
 * decided. Answered 503 like any unavailable database.
 */
export class CommitOutcomeUnknownError extends DatabaseUnavailableError {
  constructor(
    cause: DatabaseUnavailableError,
    readonly eventId: string,
  ) {
    super(cause.cause ?? cause);
    this.name = 'CommitOutcomeUnknownError';
  }
}

/** A conditional commit's key got another current version after its preconditions were checked. */
class KeyChangedError extends Error {}

/** What strata_commit_objects answers per item (schema/functions/strata_commit_objects.sql). */
interface CommitRow {
  r_index: number;
  r_status: string;
  r_blob_id: number;
  r_locator: string | null;
  r_replaced_size: number | null;
  r_unreferenced_blob_id: number | null;
}

const COMMIT_RETRIES = 5;

/** The outbox type of a fence that decided a commit did not take place (ObjectCommit.outcome); never published. */
export const FENCE_EVENT = 'commit.fenced';

/**
 * The commit of new object versions, all through strata_commit_objects: a commit is a batch of one, or,
 * with group commit, one of the concurrent commits batched into one statement. An object's metadata, its
 * blob references and its outbox event are committed in one transaction.
 */
export class ObjectCommit {
  private readonly batches: GroupCommit<CommitRequest & { item: object }, CommitResult> | undefined;

  /**
   * `groupCommit` (default: on PGlite only) batches concurrent commits. PGlite has one connection and
   * runs one statement at a time, so commits queue anyway and a batch only saves work; on PostgreSQL
   * they run in parallel on the pool, and one transaction holding many keys' locks would make them wait
   * for each other. `batchesInFlight` (default 1): batches handed to the database before the first of
   * them answers, so that PGlite's thread can run the next one while the one before waits for its WAL
   * sync. Two helped only on a loaded host; on a quiet one the smaller batches cost more than the overlap
   * bought (hack/bench/measurements.md, put-small).
   */
  constructor(
    private readonly sql: SqlClient,
    opts: { groupCommit?: boolean; batchesInFlight?: number } = {},
  ) {
    if (opts.groupCommit ?? sql.kind === 'pglite') {
      this.batches = new GroupCommit((reqs) => this.commitBatch(reqs), { maxInFlight: opts.batchesInFlight ?? 1 });
    }
  }

  /**
   * Commit a new version of `key` (replacing the current one), retrying when a concurrent write got in
   * the way. With If-Match / If-None-Match the preconditions are checked against the key's current
   * version, and the commit takes place only while that version is still current (else they are
   * checked again).
   */
  async commit(req: CommitRequest): Promise<CommitResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const eventId = uuidV7();
        const item = commitItem(req, req.conditions && (await this.currentVersion(req, req.conditions)), eventId);
        return await this.submit({ ...req, item }, eventId);
      } catch (err) {
        if (!isRetryable(err)) throw err;
        if (attempt >= COMMIT_RETRIES) throw err instanceof KeyChangedError ? new S3Error('OperationAborted') : err;
      }
    }
  }

  /**
   * One commit. A failure the server answered (a refusal, an error) rolled it back. A lost or silent
   * connection did not tell: the statement may have run, or may still run, so the outcome is decided
   * (outcome()) before the commit counts as failed; where that cannot be decided either, the error
   * says the outcome is unknown.
   */
  private async submit(req: CommitRequest & { item: object }, eventId: string): Promise<CommitResult> {
    try {
      return await (this.batches ? this.batches.submit(req) : unwrap((await this.commitBatch([req]))[0]!));
    } catch (err) {
      if (!(err instanceof DatabaseUnavailableError) || err instanceof CommitOutcomeUnknownError) throw err;
      const outcome = await this.outcome(eventId).catch(() => {
        throw new CommitOutcomeUnknownError(err, eventId);
      });
      if (outcome === 'not-committed') throw err;
      // Committed: the answer is rebuilt from the request. The blob it wrote is kept (a duplicate of
      // stored content is then a file no row names, for the orphan sweep), and a blob the replaced version
      // left unreferenced waits for the collector's sweep.
      return { meta: metaOf(req), newBlobKept: true, unreferencedBlobIds: [] };
    }
  }

  /**
   * Whether the commit that carried `eventId` took place, decided for good. A fence row with that event
   * id goes into the outbox (marked sent, so the relay never publishes it) unless the commit's own event
   * row is there: outbox.event_id is unique, so once the fence is in, that commit can no longer take
   * place (its insert fails and rolls it back), and while it is in progress the fence waits for it. Asked
   * again (a fence whose answer was lost), the fence found answers the same. Sent rows are pruned after
   * days, so an outcome is to be decided well within that time.
   */
  async outcome(eventId: string): Promise<'committed' | 'not-committed'> {
    const fenced = await this.sql.query(
      `INSERT INTO outbox (event_id, type, payload, created_at, sent_at) VALUES ($1, '${FENCE_EVENT}', '{}', now(), now())
       ON CONFLICT (event_id) DO NOTHING RETURNING id`,
      [eventId],
    );
    if (fenced.rows.length > 0) return 'not-committed';
    // (A statement of its own: the row the insert waited for is not in that statement's snapshot.)
    const found = await this.sql.query<{ type: string }>('SELECT type FROM outbox WHERE event_id = $1', [eventId]);
    return found.rows[0]?.type === FENCE_EVENT ? 'not-committed' : 'committed';
  }

  /** The key's current ETag (null: no object) once the preconditions hold against it. */
  private async currentVersion(req: CommitRequest, conditions: WriteConditions): Promise<{ currentEtag: string | null }> {
    const res = await this.sql.query<{ etag: string | null }>(
      `SELECT o.etag FROM buckets k LEFT JOIN object_info o ON o.bucket_id = k.id AND (o.bucket_id % 2) = ($1::int % 2) AND o.key = $2 AND o.state = 'NORMAL'
       WHERE k.id = $1`,
      [req.bucket.id, req.key],
    );
    if (!res.rows[0]) throw new S3Error('NoSuchBucket', undefined, { BucketName: req.bucket.name });
    const currentEtag = res.rows[0].etag;
    checkWriteConditions(conditions, currentEtag ?? undefined, req.key);
    return { currentEtag };
  }

  /**
   * Several commits in ONE statement and transaction. If the statement fails, nothing of it stays and
   * each commit runs on its own, so that a bad one fails alone.
   */
  private async commitBatch(reqs: Array<CommitRequest & { item: object }>): Promise<PromiseSettledResult<CommitResult>[]> {
    let rows: CommitRow[];
    try {
      rows = (await this.sql.query<CommitRow>('SELECT * FROM strata_commit_objects($1)', [JSON.stringify(reqs.map((r) => r.item))])).rows;
    } catch (reason) {
      // (A lost connection does not say whether the batch committed: running its items again could
      // commit them twice; each item's outcome is decided by its event id instead.)
      if (reqs.length === 1 || isDatabaseUnavailable(reason)) return reqs.map(() => ({ status: 'rejected', reason }));
      return (await Promise.all(reqs.map((req) => this.commitBatch([req])))).flat();
    }
    const byIndex = new Map(rows.map((row) => [Number(row.r_index), row]));
    return reqs.map((req, i): PromiseSettledResult<CommitResult> => {
      try {
        const row = byIndex.get(i + 1);
        if (!row) throw new Error(`the batch commit returned no row for item ${i + 1}`);
        return { status: 'fulfilled', value: commitResult(req, row) };
      } catch (reason) {
        return { status: 'rejected', reason };
      }
    });
  }
}

function unwrap<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

/** Tags and headers as a version stores them: none when empty. */
function nonEmpty<T extends object>(value: T | undefined): T | undefined {
  return value && Object.keys(value).length ? value : undefined;
}

/** The request as a strata_commit_objects item (schema/functions/strata_commit_items.sql names the fields). */
function commitItem(req: CommitRequest, condition: { currentEtag: string | null } | undefined, eventId: string): object {
  const { bucket, key, blob } = req;
  return {
    bucketId: bucket.id,
    key,
    owner: req.owner,
    ...(blob.kind === 'existing'
      ? { existingBlobId: blob.blobId }
      : {
          backendKey: blob.backendKey,
          backend: blob.backend,
          locator: blob.locator,
          blobMd5: blob.md5,
          blobSize: blob.size,
          ...(blob.data ? { data: blob.data.toString('base64') } : {}),
        }),
    size: req.size,
    etag: req.etag,
    md5: req.md5,
    contentType: req.contentType,
    userMetadata: req.userMetadata,
    tags: nonEmpty(req.tags),
    headers: nonEmpty(req.headers),
    ...(req.partSizes ? { partSizes: req.partSizes, partChecksums: req.partChecksums } : {}),
    ...(condition ? { conditional: true, currentEtag: condition.currentEtag } : {}),
    now: req.now.toISOString(),
    eventId,
    // The object.created event's payload (the function adds replacedSize).
    payload: { bucket: bucket.name, bucketId: bucket.id, key, size: req.size, etag: req.etag, contentType: req.contentType, owner: req.owner },
  };
}

/** A commit's row as the commit's result, or its refusal as the error. */
function commitResult(req: CommitRequest, row: CommitRow): CommitResult {
  const { bucket, key, blob } = req;
  if (row.r_status === 'no_bucket') throw new S3Error('NoSuchBucket', undefined, { BucketName: bucket.name });
  if (row.r_status === 'blob_gone') throw new BlobGoneError(`blob ${blob.kind === 'existing' ? blob.blobId : '?'} is being freed`);
  // The orphan sweep took the new file while this commit waited (its primary froze past the sweep's
  // grace): nothing was committed and the bytes are gone, so the client sends them again.
  if (row.r_status === 'swept') {
    throw new S3Error('ServiceUnavailable', 'The upload waited too long to commit and its data was removed; please send it again.');
  }
  if (row.r_status === 'changed') throw new KeyChangedError(`${bucket.name}/${key} changed after its preconditions were checked`);
  const kept = blob.kind === 'new' && row.r_locator === blob.locator;
  return {
    meta: metaOf(req),
    newBlobKept: kept,
    ...(blob.kind === 'new' && !kept && row.r_locator !== null ? { sharedBlob: { id: Number(row.r_blob_id), locator: row.r_locator } } : {}),
    unreferencedBlobIds: row.r_unreferenced_blob_id !== null ? [Number(row.r_unreferenced_blob_id)] : [],
  };
}

/** The committed version's metadata. */
function metaOf(req: CommitRequest): ObjectMeta {
  const { bucket, key, now } = req;
  const tags = nonEmpty(req.tags);
  // The encryption record stays here: the answer carries only its public part.
  const { headers, sse } = splitEncryption(nonEmpty(req.headers));
  const meta: ObjectMeta = {
    bucket: bucket.name,
    key,
    size: req.size,
    etag: req.etag,
    md5: req.md5,
    contentType: req.contentType,
    userMetadata: req.userMetadata,
    lastModified: now.toISOString(),
    ...(tags ? { tags } : {}),
    ...(headers ? { headers } : {}),
    ...(sse ? { sse } : {}),
  };
  return meta;
}

/**
 * A concurrent write won the key (unique violation), two commits took blob row locks in opposite orders
 * (deadlock, one is aborted), or a conditional commit's key changed: the commit can simply run again.
 */
function isRetryable(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return err instanceof KeyChangedError || isUniqueViolation(err) || code === '40P01' || code === '40001';
}
