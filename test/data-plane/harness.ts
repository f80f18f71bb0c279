import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startControlPlane } from '../../images/control-plane/src/app.js';
import { InMemoryBroker } from '../../images/control-plane/src/events/memory-broker.js';
import type { Cache } from '../../images/data-plane/src/cache/cache.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { startDataPlane } from '../../images/data-plane/src/app.js';
import type { KeyStore } from '../../images/data-plane/src/encryption/key-store.js';
import {
  createLogger,
  createPgSqlClient,
  createPgliteSqlClient,
  type RunningService,
  type SqlClient,
  type SqlExecutor,
} from '../../images/service-kit/src/index.js';
import { createTestDatabase } from '../support/pg.js';
import { filesUnder } from '../support/temp-dir.js';

export type DbKind = 'pglite' | 'postgres';
export const TOKEN = 'test-internal-token-0123456789';
export const ROOT = { user: 'rootadmin', password: 'root-password-1' };

export interface ObjectLayer {
  cp: RunningService;
  dp: RunningService;
  sql: SqlClient;
  broker: InMemoryBroker;
  /** The cache both services share (multipart state lives here). */
  cache: InMemoryCache;
  dataDir: string;
  /** The control plane's clock; tests move it. */
  clock: { now: Date };
  cpFetch(method: string, p: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  dpFetch(method: string, p: string, body?: BodyInit, headers?: Record<string, string>): Promise<Response>;
  /** Every file under the blob store, relative paths. */
  files(): Promise<string[]>;
  stop(): Promise<void>;
}

/** The server secret both planes get (STRATA_SECRET_KEY): it seals and opens stored secrets. */
export const SERVER_SECRET_KEY = 'test-server-secret-key';

/** The object layer as the gateway sees it: control plane + data plane on port 0, one database, one cache, one broker. */
/**
 * `inlineBlobBytes`: the data plane's inline limit (default: the data plane's own; 0 puts every body in a file);
 * `cache`: the cache both planes share (default a new one); `multipartCache`: the data plane's for multipart
 * state (default `cache`); `multipartUploadsPerAccount`: the data plane's cap; `dataPlaneSql` (postgres): the
 * data plane's own client of the test database (e.g. through a fault proxy), closed with the layer.
 */
export async function startObjectLayer(
  kind: DbKind,
  opts: {
    outboxRetryMs?: number;
    inlineBlobBytes?: number;
    cache?: InMemoryCache;
    multipartCache?: Cache;
    multipartUploadsPerAccount?: number;
    dataPlaneSql?: (url: string) => SqlClient;
    /** (pglite) The database both planes share instead of a new one in memory (e.g. on disk with injected faults); closed with the layer. */
    pgliteSql?: SqlClient;
    /** The data plane's encryption key stores (a test may swap the master store to rotate it). */
    keyStores?: { master?: KeyStore; kms?: KeyStore };
    /** Told the text of every statement either plane sends its database (e.g. to count bucket lookups). */
    onStatement?: (text: string) => void;
    /** Both planes' slow-client limits, ms (default: theirs). */
    idleTimeoutMs?: number;
  } = {},
): Promise<ObjectLayer> {
  const db = kind === 'postgres' ? await createTestDatabase() : undefined;
  const client = db ? createPgSqlClient(db.url) : (opts.pgliteSql ?? (await createPgliteSqlClient()));
  const sql = opts.onStatement ? watchedSql(client, opts.onStatement) : client;
  const dpSql = db && opts.dataPlaneSql ? opts.dataPlaneSql(db.url) : sql;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-dp-'));
  const logger = createLogger('test', process.env.STRATA_TEST_LOG_LEVEL ?? 'silent');
  const cache = opts.cache ?? new InMemoryCache();
  const broker = new InMemoryBroker(50);
  const clock = { now: new Date('2030-01-01T00:00:00Z') };
  const dpRef: { url?: string } = {};
  const cp = await startControlPlane({
    port: 0,
    host: '127.0.0.1',
    internalToken: TOKEN,
    secretKey: SERVER_SECRET_KEY,
    rootUser: ROOT.user,
    rootPassword: ROOT.password,
    sql,
    cache,
    broker,
    logger,
    dataPlaneUrl: () => dpRef.url,
    clock: () => clock.now,
    bodyIdleTimeoutMs: opts.idleTimeoutMs,
    readerIdleTimeoutMs: opts.idleTimeoutMs,
  });
  const dp = await startDataPlane({
    port: 0,
    host: '127.0.0.1',
    internalToken: TOKEN,
    secretKey: SERVER_SECRET_KEY,
    dataDir,
    sql: dpSql,
    cache,
    broker,
    logger,
    outboxRetryMs: opts.outboxRetryMs ?? 100,
    blobSweepMs: 0,
    inlineBlobBytes: opts.inlineBlobBytes,
    multipartCache: opts.multipartCache,
    multipartUploadsPerAccount: opts.multipartUploadsPerAccount,
    keyStores: opts.keyStores,
    bodyIdleTimeoutMs: opts.idleTimeoutMs,
    readerIdleTimeoutMs: opts.idleTimeoutMs,
  });
  dpRef.url = dp.url;
  const files = () => filesUnder(dataDir);
  return {
    cp,
    dp,
    sql,
    broker,
    cache,
    dataDir,
    clock,
    cpFetch: (method, p, body, headers = {}) =>
      fetch(cp.url + p, {
        method,
        headers: { 'x-strata-internal-token': TOKEN, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    dpFetch: (method, p, body, headers = {}) => fetch(dp.url + p, { method, headers: { 'x-strata-internal-token': TOKEN, ...headers }, body }),
    files,
    async stop() {
      await dp.stop(1000);
      await cp.stop(1000);
      if (dpSql !== sql) await dpSql.close();
      await sql.close();
      await db?.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export const enc = encodeURIComponent;

/** `sql`, telling `onStatement` the text of each statement it runs (in transactions too). */
function watchedSql(sql: SqlClient, onStatement: (text: string) => void): SqlClient {
  const watched = (executor: SqlExecutor): SqlExecutor => ({
    query: (text, params) => {
      onStatement(text);
      return executor.query(text, params);
    },
    exec: (script) => executor.exec(script),
  });
  return { ...watched(sql), kind: sql.kind, transaction: (fn) => sql.transaction((tx) => fn(watched(tx))), close: () => sql.close() };
}

/** Poll until `check` passes (events are asynchronous); fails with the last error. */
export { eventually } from '../support/eventually.js';

/** A raw PUT to the data plane (fetch sets Content-Length itself): `send` writes the body and may end or cut the request; resolves with the status, 0 when the connection failed. */
export function rawPut(url: string, headers: Record<string, string>, send: (req: http.ClientRequest) => void): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(new URL(url), { method: 'PUT', headers: { 'x-strata-internal-token': 'test-internal-token-0123456789', ...headers } });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    send(req);
  });
}
