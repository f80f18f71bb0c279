import { createPgSqlClient, DatabaseUnavailableError, type PgTimeouts, type SqlClient, type SqlExecutor, type SqlResult } from './sql.js';

/** HTTP header that carries a WAL position between services ("write token"), e.g. `0/3000148`. */
export const MIN_LSN_HEADER = 'x-strata-min-lsn';

/** Where a read may be answered from. */
export interface ReadOptions {
  /** Always the primary (e.g. a read that decides a write). */
  fresh?: boolean;
  /**
   * A WAL position (`pg_lsn` text such as `16/B374D848`, e.g. from another service's write via
   * MIN_LSN_HEADER) that the answer must include. Invalid text throws.
   */
  minLsn?: string;
  /**
   * The answer must include every transaction committed anywhere before this call: one tiny query for
   * the primary's current WAL position, then a replica that has replayed that far (else the primary).
   */
  latest?: boolean;
  /**
   * The caller tolerates the lag of a healthy replica (e.g. credential lookups): any healthy replica
   * answers, without asking the primary anything, so such reads keep working while the primary hangs
   * or is down. The primary answers only when no replica is healthy. Callers that must see a row
   * written a moment ago re-read a miss with `fresh`.
   */
  stale?: boolean;
}

export type ReadTarget = 'primary' | 'replica';

export interface ReplicaStatus {
  name: string;
  healthy: boolean;
  /** Last replay position seen on it (`pg_last_wal_replay_lsn()`), if any. */
  replayLsn?: string;
}

export interface RoutingSqlClientOptions {
  /** Takes every write, every transaction and every read that a replica cannot answer fresh enough. */
  primary: SqlClient;
  /**
   * Hot standbys of that primary. Each must address ONE server (a pod's own DNS name, not a Service
   * that balances over several): its replay position is cached per client.
   */
  replicas: Array<{ name: string; client: SqlClient }>;
  /** A replica's replay position is re-read when older than this. Default 5 ms. */
  lsnRefreshMs?: number;
  /**
   * How long a read that needs a WAL position may wait for a healthy replica to replay it (polling
   * every ~2 ms) before going to the primary. Under steady writes a replica is always a little
   * behind "now", so a few ms of waiting keeps `latest` reads off the primary. Default 0 (no wait).
   */
  replicaWaitMs?: number;
  /** A replica that failed is skipped for this long. Default 5000 ms. */
  unhealthyMs?: number;
  /** Limit for the replay-position probe; a replica slower than this counts as failed. Default 1000 ms. */
  probeTimeoutMs?: number;
  /**
   * After the primary failed to tell its WAL position (unreachable, or silent past the pool's limits),
   * reads that need it do not ask it again for this long (they go to a replica proven caught up, see
   * the class comment); the next read after it asks again, waiting at most `probeTimeoutMs`, until it
   * answers. Default 1000 ms.
   */
  primaryRetryMs?: number;
  /** Applied to read() calls without `fresh`/`latest` of their own: 'session' (default) or 'latest'. */
  defaultRead?: 'session' | 'latest';
  /** Called for every read() with where it went and why (metrics). */
  onRead?: (target: ReadTarget, reason: string) => void;
  /** Called when a replica is marked unhealthy (logs). */
  onReplicaError?: (replica: string, err: unknown) => void;
}

interface Replica {
  name: string;
  client: SqlClient;
  replayLsn: bigint | undefined;
  probedAt: number;
  probing: Promise<void> | undefined;
  unhealthyUntil: number;
}

/** How long a read may wait for a streaming replica to replay what it received, while the primary cannot be asked. */
const CATCH_UP_WAIT_MS = 250;

/**
 * What a replica knows of its primary: its replay position, what it has received, and its WAL
 * receiver's state with the primary's WAL end as last reported to it (`latest_end_lsn`; NULL without
 * pg_read_all_stats or while not streaming).
 */
const CATCH_UP_SQL = `SELECT pg_last_wal_replay_lsn()::text AS replay, pg_last_wal_receive_lsn()::text AS received,
  r.status, r.latest_end_lsn::text AS primary_end FROM (SELECT 1) one LEFT JOIN pg_stat_wal_receiver r ON true`;

/** Parse `pg_lsn` text (`X/Y`, two hex numbers) into a comparable number. */
export function parseLsn(text: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text.trim());
  if (!m) throw new Error(`not a WAL position: ${JSON.stringify(text)}`);
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}

export function formatLsn(lsn: bigint): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** The later of two WAL positions (either may be absent), as text; for merging tokens. */
export function laterLsn(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return parseLsn(a) >= parseLsn(b) ? a : b;
}

/**
 * A SqlClient over one PostgreSQL primary and a pool of streaming replicas, with read-your-writes.
 *
 * - `query`, `exec` and `transaction` always run on the primary (the client cannot tell a read from
 *   a write in arbitrary SQL), and each counts as a write of this client.
 * - `read(text, params, opts)` is for read-only statements. It goes to a replica only when that
 *   cannot be stale for the caller; otherwise to the primary. The required WAL position is the
 *   latest of: this client's own last write (the primary's `pg_current_wal_insert_lsn()` read after
 *   the write completed — fetched lazily, once per batch of writes, at the next read), `opts.minLsn`,
 *   and with `opts.latest` the primary's position now. A replica qualifies when its
 *   `pg_last_wal_replay_lsn()` (cached, re-read when older than `lsnRefreshMs`) is at least that
 *   position (waiting up to `replicaWaitMs` for one to get there). With nothing required (no write by
 *   this client, no token) any healthy replica answers.
 *   `opts.fresh` always reads the primary.
 * - A replica whose probe or read fails with a connection-level error is marked unhealthy for
 *   `unhealthyMs` and the read is answered by the primary; a read cancelled by a conflict with WAL
 *   replay is answered by the primary too (the replica stays in use); SQL errors of the statement
 *   itself are thrown as they are. After the window the replica is probed again before use.
 * - `opts.stale` reads go to any healthy replica without asking the primary (see ReadOptions.stale).
 * - While the primary cannot tell its WAL position (unreachable, or silent past the pool's limits; then
 *   not asked again for `primaryRetryMs`, and after it with `probeTimeoutMs` until it answers), a read that needs a position goes to a replica that is
 *   provably caught up with everything its primary has flushed: its WAL receiver is streaming, it has
 *   replayed all it received and at least the WAL end the primary last reported to it, and at least
 *   this client's known writes and `opts.minLsn`. Every write acknowledged before the primary stopped
 *   talking is then covered, up to what was still in flight to the replica (milliseconds on a healthy
 *   link). Else the read fails with the primary's error (503): freshness cannot be proven.
 *   Reading pg_stat_wal_receiver needs pg_read_all_stats (or superuser); without it this never holds.
 * - `writeLsn()` answers this client's write token (send it as MIN_LSN_HEADER to a service that must
 *   see the writes). `replicaStatus()` is for status pages; replicas never fail readiness, since
 *   the primary answers in their place.
 * - `close()` closes the primary and every replica client.
 */
export class RoutingSqlClient implements SqlClient {
  readonly kind: SqlClient['kind'];
  private readonly primary: SqlClient;
  private readonly replicas: Replica[];
  private readonly opts: Required<
    Pick<RoutingSqlClientOptions, 'lsnRefreshMs' | 'replicaWaitMs' | 'unhealthyMs' | 'probeTimeoutMs' | 'primaryRetryMs' | 'defaultRead'>
  > &
    Pick<RoutingSqlClientOptions, 'onRead' | 'onReplicaError'>;
  private next = 0;
  /** Writes finished so far, and how many of them `knownWriteLsn` covers. */
  private writesDone = 0;
  private writesCovered = 0;
  private knownWriteLsn: bigint | undefined;
  private fetchingWriteLsn: { covers: number; done: Promise<void> } | undefined;
  /** The primary's last failure to tell its WAL position, and until when it is not asked again. */
  private primaryFault: { err: unknown; until: number } | undefined;

  constructor(options: RoutingSqlClientOptions) {
    this.primary = options.primary;
    this.kind = options.primary.kind;
    this.replicas = options.replicas.map((r) => ({ ...r, replayLsn: undefined, probedAt: 0, probing: undefined, unhealthyUntil: 0 }));
    this.opts = {
      lsnRefreshMs: options.lsnRefreshMs ?? 5,
      replicaWaitMs: options.replicaWaitMs ?? 0,
      unhealthyMs: options.unhealthyMs ?? 5000,
      probeTimeoutMs: options.probeTimeoutMs ?? 1000,
      primaryRetryMs: options.primaryRetryMs ?? 1000,
      defaultRead: options.defaultRead ?? 'session',
      onRead: options.onRead,
      onReplicaError: options.onReplicaError,
    };
  }

  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<SqlResult<R>> {
    return this.asWrite(() => this.primary.query<R>(text, params));
  }

  exec(script: string): Promise<void> {
    return this.asWrite(() => this.primary.exec(script));
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.asWrite(() => this.primary.transaction(fn));
  }

  /** A read-only statement, on a replica when that cannot be stale (see the class comment). */
  async read<R = Record<string, unknown>>(text: string, params?: unknown[], opts: ReadOptions = {}): Promise<SqlResult<R>> {
    if (opts.fresh) return this.onPrimary<R>(text, params, 'fresh');
    if (this.replicas.length === 0) return this.onPrimary<R>(text, params, 'no-replicas');
    if (opts.stale) {
      const replica = await this.pickReplica(undefined);
      if (!replica) return this.onPrimary<R>(text, params, 'no-healthy-replica');
      return this.onReplica<R>(replica, text, params, 'stale-ok');
    }
    const latest = opts.latest ?? this.opts.defaultRead === 'latest';
    const token = opts.minLsn !== undefined ? parseLsn(opts.minLsn) : undefined;
    let required: bigint | undefined;
    try {
      // The primary's position now also covers this client's writes: one query instead of two.
      required = max(token, latest ? await this.primaryLsnNow() : await this.ownWriteLsn());
    } catch (err) {
      if (!isReplicaFault(err)) throw err;
      const replica = await this.caughtUpReplica(max(token, this.knownWriteLsn));
      if (!replica) throw err;
      return this.onReplica<R>(replica, text, params, 'primary-unreachable');
    }

    const replica = await this.waitForReplica(required);
    if (!replica) return this.onPrimary<R>(text, params, this.anyHealthy() ? 'replica-behind' : 'no-healthy-replica');
    return this.onReplica<R>(replica, text, params, required === undefined ? 'any' : 'caught-up');
  }

  /** Run a read on `replica`; a replica fault (or a conflict with WAL replay) sends it to the primary instead. */
  private async onReplica<R>(replica: Replica, text: string, params: unknown[] | undefined, reason: string): Promise<SqlResult<R>> {
    try {
      const result = await replica.client.query<R>(text, params);
      this.opts.onRead?.('replica', reason);
      return result;
    } catch (err) {
      // A query cancelled because it conflicted with WAL replay says nothing about the replica's health.
      if (isRecoveryConflict(err)) return this.onPrimary<R>(text, params, 'replica-conflict');
      if (!isReplicaFault(err)) throw err;
      this.markUnhealthy(replica, err);
      return this.onPrimary<R>(text, params, 'replica-failed');
    }
  }

  /** This client's write token: a WAL position covering every write it finished; undefined before any. */
  async writeLsn(): Promise<string | undefined> {
    const lsn = await this.ownWriteLsn();
    return lsn === undefined ? undefined : formatLsn(lsn);
  }

  replicaStatus(): ReplicaStatus[] {
    const now = Date.now();
    return this.replicas.map((r) => ({
      name: r.name,
      healthy: r.unhealthyUntil <= now,
      ...(r.replayLsn !== undefined ? { replayLsn: formatLsn(r.replayLsn) } : {}),
    }));
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.primary.close(), ...this.replicas.map((r) => r.client.close())]);
  }

  private async asWrite<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } finally {
      // Counted even on failure: a failed COMMIT may still have committed.
      this.writesDone++;
    }
  }

  private async onPrimary<R>(text: string, params: unknown[] | undefined, reason: string): Promise<SqlResult<R>> {
    const result = await this.primary.query<R>(text, params);
    this.opts.onRead?.('primary', reason);
    return result;
  }

  /**
   * The WAL position covering every write finished before this call. The insert position read after
   * a commit returned is at or past that commit's record (unlike the write/flush positions, which
   * lag behind with synchronous_commit off). Concurrent reads share one fetch.
   */
  private async ownWriteLsn(): Promise<bigint | undefined> {
    while (this.writesCovered < this.writesDone) {
      const pending = this.fetchingWriteLsn;
      if (pending && pending.covers >= this.writesDone) {
        await pending.done;
        continue;
      }
      const covers = this.writesDone;
      const done = this.primaryLsnNow().then(() => undefined);
      const fetch = { covers, done };
      this.fetchingWriteLsn = fetch;
      try {
        await done;
      } finally {
        if (this.fetchingWriteLsn === fetch) this.fetchingWriteLsn = undefined;
      }
    }
    return this.knownWriteLsn;
  }

  /**
   * The primary's WAL insert position now; it covers every write this client finished before the call.
   * A primary that failed to answer within `primaryRetryMs` is not asked (its error is thrown at once).
   */
  private async primaryLsnNow(): Promise<bigint> {
    const covers = this.writesDone;
    const fault = this.primaryFault;
    if (fault && Date.now() < fault.until) throw fault.err;
    let res: SqlResult<{ lsn: string }>;
    try {
      const query = this.primary.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      // A healthy primary has the pool's limits (a busy pool is queueing, not a fault); one that failed
      // last time is asked again with the probe's short limit, so reads wait at most that for it.
      res = fault
        ? await withTimeout(query, this.opts.probeTimeoutMs, `the primary did not tell its WAL position within ${this.opts.probeTimeoutMs} ms`)
        : await query;
    } catch (err) {
      if (!isReplicaFault(err)) throw err;
      // A silent primary (the timeout above) is as unavailable as an unreachable one: services answer 503.
      const unavailable = err instanceof DatabaseUnavailableError ? err : new DatabaseUnavailableError(err);
      this.primaryFault = { err: unavailable, until: Date.now() + this.opts.primaryRetryMs };
      throw unavailable;
    }
    this.primaryFault = undefined;
    const lsn = parseLsn(res.rows[0]!.lsn);
    this.knownWriteLsn = max(this.knownWriteLsn, lsn);
    this.writesCovered = Math.max(this.writesCovered, covers);
    return lsn;
  }

  /** pickReplica, retried with fresh probes for up to `replicaWaitMs` while healthy replicas lag. */
  private async waitForReplica(required: bigint | undefined): Promise<Replica | undefined> {
    const deadline = Date.now() + this.opts.replicaWaitMs;
    for (;;) {
      const replica = await this.pickReplica(required);
      if (replica || required === undefined || !this.anyHealthy() || Date.now() >= deadline) return replica;
      await new Promise((r) => setTimeout(r, Math.min(2, Math.max(0, deadline - Date.now()))));
    }
  }

  /** A healthy replica that has replayed `required` (any healthy one when nothing is required), round robin. */
  private async pickReplica(required: bigint | undefined): Promise<Replica | undefined> {
    const start = this.next++;
    for (let i = 0; i < this.replicas.length; i++) {
      const replica = this.replicas[(start + i) % this.replicas.length]!;
      if (replica.unhealthyUntil > Date.now()) continue;
      if (Date.now() - replica.probedAt > this.opts.lsnRefreshMs) await this.probe(replica);
      if (replica.unhealthyUntil > Date.now()) continue;
      if (required === undefined) return replica;
      if (replica.replayLsn !== undefined && replica.replayLsn >= required) return replica;
    }
    return undefined;
  }

  /**
   * A healthy replica provably caught up with its primary (see the class comment) and at `required`,
   * for reads while the primary cannot be asked; undefined when none is.
   */
  private async caughtUpReplica(required: bigint | undefined): Promise<Replica | undefined> {
    // The primary writes WAL of its own now and then (checkpoints, standby snapshots): a replica a few
    // ms from replaying it is waited for, up to CATCH_UP_WAIT_MS (or replicaWaitMs when longer).
    const deadline = Date.now() + Math.max(this.opts.replicaWaitMs, CATCH_UP_WAIT_MS);
    for (;;) {
      const replica = await this.caughtUpReplicaNow(required);
      if (replica || !this.anyHealthy() || Date.now() >= deadline) return replica;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private async caughtUpReplicaNow(required: bigint | undefined): Promise<Replica | undefined> {
    const start = this.next++;
    for (let i = 0; i < this.replicas.length; i++) {
      const replica = this.replicas[(start + i) % this.replicas.length]!;
      if (replica.unhealthyUntil > Date.now()) continue;
      try {
        const res = await withTimeout(
          replica.client.query<{ replay: string | null; received: string | null; status: string | null; primary_end: string | null }>(CATCH_UP_SQL),
          this.opts.probeTimeoutMs,
          `replica ${replica.name} did not answer within ${this.opts.probeTimeoutMs} ms`,
        );
        const row = res.rows[0];
        if (!row?.replay || !row.received || !row.primary_end || row.status !== 'streaming') continue;
        const replay = parseLsn(row.replay);
        if (replay >= parseLsn(row.received) && replay >= parseLsn(row.primary_end) && (required === undefined || replay >= required)) return replica;
      } catch (err) {
        if (!isReplicaFault(err)) throw err;
        this.markUnhealthy(replica, err);
      }
    }
    return undefined;
  }

  /** Refresh a replica's replay position (one probe in flight per replica). */
  private probe(replica: Replica): Promise<void> {
    replica.probing ??= (async () => {
      try {
        const res = await withTimeout(
          replica.client.query<{ lsn: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS lsn'),
          this.opts.probeTimeoutMs,
          `replica ${replica.name} did not answer within ${this.opts.probeTimeoutMs} ms`,
        );
        const lsn = res.rows[0]?.lsn;
        // NULL: the server is not in recovery (not a standby) — never trusted for a required position.
        replica.replayLsn = lsn ? parseLsn(lsn) : undefined;
        replica.probedAt = Date.now();
      } catch (err) {
        this.markUnhealthy(replica, err);
      } finally {
        replica.probing = undefined;
      }
    })();
    return replica.probing;
  }

  private markUnhealthy(replica: Replica, err: unknown): void {
    replica.unhealthyUntil = Date.now() + this.opts.unhealthyMs;
    // A restarted standby may report an older position than before: never reuse the old one.
    replica.replayLsn = undefined;
    replica.probedAt = 0;
    this.opts.onReplicaError?.(replica.name, err);
  }

  private anyHealthy(): boolean {
    return this.replicas.some((r) => r.unhealthyUntil <= Date.now());
  }
}

function max(a: bigint | undefined, b: bigint | undefined): bigint | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}

/**
 * Errors that say "this replica cannot answer now", not "this statement is wrong": no SQLSTATE
 * (socket errors, pool timeouts), connection exceptions (08), shutdown / cannot connect now (57P0x),
 * too many connections (53300).
 */
function isReplicaFault(err: unknown): boolean {
  const code = sqlState(err);
  if (code === undefined) return true;
  return code.startsWith('08') || code.startsWith('57P') || code === '53300';
}

/** "canceling statement due to conflict with recovery": 40001 on a standby. */
function isRecoveryConflict(err: unknown): boolean {
  return sqlState(err) === '40001';
}

function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  promise.catch(() => undefined); // a probe abandoned by the timeout must not become an unhandled rejection
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The production client from env-style settings: a pg pool on the primary and one per replica URL
 * (STRATA_PG_URL, STRATA_PG_REPLICA_URLS split on commas). Replica pools are named by host:port.
 */
export function createPgRoutingSqlClient(
  primaryUrl: string,
  replicaUrls: string[],
  opts: Omit<RoutingSqlClientOptions, 'primary' | 'replicas'> & { max?: number } & PgTimeouts = {},
): RoutingSqlClient {
  const { max, connectTimeoutMs, statementTimeoutMs, queryTimeoutMs, ...routing } = opts;
  const pool = { max, connectTimeoutMs, statementTimeoutMs, queryTimeoutMs };
  return new RoutingSqlClient({
    ...routing,
    primary: createPgSqlClient(primaryUrl, pool),
    replicas: replicaUrls.map((url) => ({ name: replicaName(url), client: createPgSqlClient(url, pool) })),
  });
}

function replicaName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}`;
  } catch {
    return 'replica';
  }
}

/** Split STRATA_PG_REPLICA_URLS (comma- or whitespace-separated; empty = no replicas). */
export function parseReplicaUrls(value: string | undefined): string[] {
  return (value ?? '').split(/[\s,]+/).filter((s) => s.length > 0);
}

/**
 * Run a read-only statement through `read()` when `sql` routes reads (a RoutingSqlClient), else
 * plain `query()` — so stores can mark their replica-safe reads without caring which client they got.
 */
export function readQuery<R = Record<string, unknown>>(sql: SqlClient, text: string, params?: unknown[], opts?: ReadOptions): Promise<SqlResult<R>> {
  return sql instanceof RoutingSqlClient ? sql.read<R>(text, params, opts) : sql.query<R>(text, params);
}
