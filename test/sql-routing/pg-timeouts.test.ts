import { expect } from 'chai';
import express from 'express';
import { pino } from 'pino';
import {
  createPgSqlClient,
  DatabaseUnavailableError,
  listen,
  PG_TIMEOUT_DEFAULTS,
  Registry,
  type RunningService,
  type SqlClient,
} from '../../images/service-kit/src/index.js';
import { internalErrorHandler } from '../../images/object-model/src/index.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';

const ADMIN_URL = new URL(process.env.STRATA_TEST_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');

const outcome = async (p: Promise<unknown>): Promise<unknown> => {
  try {
    return await p;
  } catch (err) {
    return err;
  }
};

/**
 * A frozen PostgreSQL server (a silent TCP proxy in front of the real one: connections stay open, no
 * byte moves, as with a SIGSTOPped primary) fails statements and connects with DatabaseUnavailableError
 * at the pool's limits, and a service answers those 503 ServiceUnavailable; the pool works again at once
 * when the server answers again.
 */
describe('PostgreSQL pool limits: a frozen server is a 503, not a hang', function () {
  this.timeout(30_000);
  let proxy: TcpFaultProxy;
  let sql: SqlClient;
  let service: RunningService | undefined;

  before(async () => {
    proxy = await startTcpProxy({ host: ADMIN_URL.hostname, port: Number(ADMIN_URL.port || 5432) });
    const url = new URL(ADMIN_URL);
    url.port = String(proxy.port);
    sql = createPgSqlClient(url.toString(), { max: 2, connectTimeoutMs: 500, statementTimeoutMs: 600, queryTimeoutMs: 800 });
  });
  after(async () => {
    await service?.stop(1000);
    proxy.restore();
    await sql?.close().catch(() => undefined);
    await proxy?.close();
  });

  it('has limits by default, a frozen primary answered well within 10 s', () => {
    for (const ms of Object.values(PG_TIMEOUT_DEFAULTS)) expect(ms).to.be.within(1, 10_000);
  });

  it('a statement on a frozen server, a transaction, and a new connection fail with DatabaseUnavailableError; service resumes after', async () => {
    expect((await sql.query<{ n: number }>('SELECT 1 AS n')).rows).to.deep.equal([{ n: 1 }]);
    proxy.stall();
    // The pooled connection goes silent (query limit), then new ones cannot be made (connect limit).
    for (const attempt of [
      () => sql.query('SELECT 1'),
      () => sql.transaction((tx) => tx.query('SELECT 1')),
      () => sql.query('SELECT 2'),
      () => sql.query('SELECT 3'),
    ]) {
      const err = await outcome(attempt());
      expect(err, String(err)).to.be.instanceOf(DatabaseUnavailableError);
    }
    // The server's own statement limit applies too (here on a live server).
    proxy.restore();
    const slow = await outcome(sql.query('SELECT pg_sleep(5)'));
    expect(slow).to.be.instanceOf(DatabaseUnavailableError);
    expect((slow as DatabaseUnavailableError).code).to.equal('57014');
    expect((await sql.query<{ n: number }>('SELECT 4 AS n')).rows).to.deep.equal([{ n: 4 }]);
  });

  it('a service answers a frozen database 503 ServiceUnavailable (not 500), and a SQL error stays a 500', async () => {
    const app = express();
    app.get('/frozen', (_req, res, next) => {
      sql.query('SELECT 1').then(() => res.send('ok'), next);
    });
    app.get('/bad', (_req, res, next) => {
      sql.query('SELECT * FROM no_such_table_here').then(() => res.send('ok'), next);
    });
    app.use(internalErrorHandler(pino({ level: 'silent' })));
    service = await listen(app, { name: 'pg-timeouts', logger: pino({ level: 'silent' }), registry: new Registry(), port: 0, host: '127.0.0.1' });
    proxy.stall();
    const frozen = await fetch(`${service.url}/frozen`);
    expect(frozen.status).to.equal(503);
    expect(((await frozen.json()) as { error: { code: string } }).error.code).to.equal('ServiceUnavailable');
    proxy.restore();
    expect((await fetch(`${service.url}/frozen`)).status).to.equal(200);
    expect((await fetch(`${service.url}/bad`)).status).to.equal(500);
  });
});
