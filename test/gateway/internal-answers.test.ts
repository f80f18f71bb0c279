import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { ControlPlaneClient } from '../../images/gateway/src/clients/control-plane.js';
import { DataPlaneClient } from '../../images/gateway/src/clients/data-plane.js';
import { httpObjectLayer } from '../../images/gateway/src/clients/object-layer.js';
import { isNotUpstreamFault } from '../../images/gateway/src/flow-control/breakers.js';
import { s3Rejection } from '../support/s3-rejection.js';
import { codeOf, handlerApp, type HandlerApp } from './handler-app.js';

/** What the fake upstream answers one request: status, headers, body (an object goes as JSON). */
interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
}

const BUCKET = { name: 'photos', owner: 'alice', createdAt: '2026-01-02T03:04:05.000Z', backend: { kind: 'fs' }, stats: { objects: 3 } };
const META = {
  bucket: 'photos',
  key: 'a.txt',
  size: 5,
  etag: '5d41402abc4b2a76b9719d911017c592',
  md5: null,
  contentType: 'text/plain',
  userMetadata: {},
  lastModified: '2026-01-02T03:04:05.000Z',
};
const READ_HEADERS = {
  etag: `"${META.etag}"`,
  'last-modified': 'Fri, 02 Jan 2026 03:04:05 GMT',
  'x-strata-size': '5',
  'content-type': 'text/plain',
};

/**
 * The gateway's clients against an upstream that answers whatever a test sets (`answers` by
 * `METHOD path`): every JSON answer is read through its schema, so one of another shape is an
 * InternalError that names the field, never an `undefined` or a NaN flowing on.
 */
describe('gateway clients: answers of the data and control planes are read by their schemas', () => {
  let server: http.Server;
  let answers: Map<string, Answer>;
  let cp: ControlPlaneClient;
  let dp: DataPlaneClient;

  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const answer = answers.get(`${req.method} ${req.url!.split('?')[0]}`) ?? { status: 404, body: { error: { code: 'NoSuchKey', message: 'no' } } };
        const body = answer.body === undefined ? '' : typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
        res.writeHead(answer.status ?? 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...answer.headers });
        res.end(req.method === 'HEAD' ? undefined : body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    cp = new ControlPlaneClient(base, 'token');
    dp = new DataPlaneClient(base, 'token');
  });
  beforeEach(() => {
    answers = new Map([['GET /internal/buckets/photos', { body: BUCKET }]]);
  });
  after(async () => {
    cp.http.close();
    dp.http.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const failure = s3Rejection;

  it('well-formed answers pass, fields beyond the type included (a bucket with its stats)', async () => {
    expect(await cp.getBucket('photos')).to.deep.equal(BUCKET);
    answers.set('GET /internal/buckets/photos/objects/a.txt', { body: META });
    expect(await cp.headObject('photos', 'a.txt')).to.deep.equal(META);
  });

  it('a control-plane answer of the wrong shape is InternalError naming the field, counted against the upstream', async () => {
    answers.set('GET /internal/buckets/photos/objects/a.txt', { body: { ...META, size: 'five' } });
    const err = await failure(cp.headObject('photos', 'a.txt'));
    expect(err.code).to.equal('InternalError');
    expect(err.status).to.equal(500);
    expect(err.message).to.include('control plane').and.include('size');
    expect(isNotUpstreamFault(err)).to.equal(false);

    answers.set('GET /internal/buckets/photos/objects', { body: { objects: 'none', commonPrefixes: [], isTruncated: false } });
    expect((await failure(cp.listObjects('photos', {}))).message).to.include('objects');
    answers.set('GET /internal/users/alice/buckets', { body: { buckets: [{ name: 'photos' }] } });
    expect((await failure(cp.listBuckets('alice'))).message).to.include('buckets.0.createdAt');
    answers.set('GET /internal/buckets/photos/lifecycle', { body: { rules: [{ id: 'r' }] } });
    expect((await failure(cp.getBucketConfig('photos', 'lifecycle'))).message).to.include('rules.0');
    answers.set('GET /internal/buckets/photos', { body: 'not json' });
    expect((await failure(cp.getBucket('photos'))).message).to.include('not JSON');
  });

  it('a data-plane PUT answer of the wrong shape is InternalError, not an object without an ETag', async () => {
    answers.set('PUT /internal/objects/photos/a.txt', { body: { object: { ...META, etag: undefined }, instant: false } });
    const err = await failure(dp.putObject('photos', 'a.txt', { owner: 'alice', userMetadata: {}, contentLength: 5 }, Readable.from([Buffer.from('hello')])));
    expect(err.code).to.equal('InternalError');
    expect(err.message).to.include('object.etag');
    answers.set('POST /internal/multipart/photos/a.txt', { body: { uploadId: 7 } });
    expect((await failure(dp.createMultipart('photos', 'a.txt', { owner: 'alice' }))).message).to.include('uploadId');
  });

  it('a data-plane read whose size, length, ETag or date is malformed is InternalError, not NaN or an Invalid Date', async () => {
    answers.set('HEAD /internal/objects/photos/a.txt', { headers: READ_HEADERS });
    const read = await dp.getObject('photos', 'a.txt', { method: 'HEAD' });
    expect(read.object).to.deep.include({ size: 5, etag: META.etag, lastModified: META.lastModified });
    for (const [name, value] of [
      ['x-strata-size', 'five'],
      ['last-modified', 'yesterday'],
      ['etag', ''],
    ] as const) {
      answers.set('HEAD /internal/objects/photos/a.txt', { headers: { ...READ_HEADERS, [name]: value } });
      const err = await failure(dp.getObject('photos', 'a.txt', { method: 'HEAD' }));
      expect(err.code, name).to.equal('InternalError');
      expect(err.message, name).to.include(name);
    }
  });

  describe('through the S3 endpoint', () => {
    let app: HandlerApp;
    before(async () => {
      app = await handlerApp(httpObjectLayer(cp, dp));
    });
    after(() => app.close());

    it('answers a malformed upstream answer with an S3 InternalError (500), and keeps serving', async () => {
      answers.set('PUT /internal/objects/photos/a.txt', { body: { object: { ...META, size: -1 }, instant: false } });
      const put = await app.fetch('PUT', '/photos/a.txt', { body: 'hello' });
      expect(put.status).to.equal(500);
      expect(codeOf(await put.text())).to.equal('InternalError');
      answers.set('GET /internal/buckets/photos/objects', { body: { objects: [], commonPrefixes: [], isTruncated: false } });
      const list = await app.fetch('GET', '/photos?list-type=2');
      expect(list.status).to.equal(200);
    });
  });
});
