import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import { expect } from 'chai';
import express from 'express';
import pino from 'pino';
import { internalErrorHandler, requireInternalToken, S3Error } from '../../images/object-model/src/index.js';

/** The internal API's token check and error answers, shared by the control plane and the data plane. */
describe('service kit: internal API (token, error answers)', () => {
  const TOKEN = 'internal-token-for-this-test';
  class OwnError extends Error {}
  let server: http.Server;
  let base: string;

  before(async () => {
    const app = express();
    app.use('/internal', requireInternalToken(TOKEN));
    app.post('/internal/echo', express.json({ limit: '1kb' }), (req, res) => void res.json(req.body));
    app.get('/internal/s3', () => {
      throw new S3Error('NoSuchKey', 'no such key here');
    });
    app.get('/internal/own', () => {
      throw new OwnError('mapped by the service');
    });
    app.get('/internal/bug', () => {
      throw new Error('secret detail of a bug');
    });
    app.use(internalErrorHandler(pino({ level: 'silent' }), (err) => (err instanceof OwnError ? new S3Error('ServiceUnavailable', 'retry later') : undefined)));
    await new Promise<void>((resolve) => {
      server = app.listen(0, '127.0.0.1', () => resolve());
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const call = (path: string, init: RequestInit = {}, token: string | null = TOKEN) =>
    fetch(`${base}${path}`, { ...init, headers: { ...(token ? { 'x-strata-internal-token': token } : {}), ...(init.headers as Record<string, string>) } });

  it('refuses a missing or wrong token with 401 before any route runs', async () => {
    for (const token of [null, 'wrong', `${TOKEN}x`]) {
      const res = await call('/internal/echo', { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } }, token);
      expect(res.status).to.equal(401);
      expect((await res.json()).error.code).to.equal('Unauthorized');
    }
    const ok = await call('/internal/echo', { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(ok.status).to.equal(200);
    expect(await ok.json()).to.deep.equal({ a: 1 });
  });

  it('answers garbage JSON and oversized bodies with 400 and their own codes', async () => {
    const garbage = await call('/internal/echo', { method: 'POST', body: '{"a":', headers: { 'content-type': 'application/json' } });
    expect(garbage.status).to.equal(400);
    expect((await garbage.json()).error).to.include({ code: 'InvalidArgument', message: 'the request body is not valid JSON' });
    const big = await call('/internal/echo', {
      method: 'POST',
      body: JSON.stringify({ a: 'x'.repeat(4096) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(big.status).to.equal(400);
    expect((await big.json()).error.code).to.equal('MaxMessageLengthExceeded');
  });

  it('keeps S3 errors, applies the service mapping, and hides unexpected errors behind InternalError', async () => {
    const s3 = await call('/internal/s3');
    expect(s3.status).to.equal(404);
    expect((await s3.json()).error).to.include({ code: 'NoSuchKey', message: 'no such key here' });
    const own = await call('/internal/own');
    expect(own.status).to.equal(503);
    expect((await own.json()).error).to.include({ code: 'ServiceUnavailable', message: 'retry later' });
    const bug = await call('/internal/bug');
    expect(bug.status).to.equal(500);
    const text = await bug.text();
    expect(JSON.parse(text).error.code).to.equal('InternalError');
    expect(text).to.not.contain('secret detail');
  });
});
