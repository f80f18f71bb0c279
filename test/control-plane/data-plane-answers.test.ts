import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { HttpBlobCollector, HttpUploadExpirer } from '../../images/control-plane/src/purge/data-plane-gc.js';
import { s3Rejection } from '../support/s3-rejection.js';

/**
 * The control plane's calls to the data plane (blob GC, upload expiry) read its answers through their
 * schemas too (object-model internal-answers.ts): a count of another shape fails the call with
 * InternalError naming the field, instead of a string or undefined counted as freed or aborted.
 */
describe('control plane → data plane: answers read by their schemas', () => {
  let server: http.Server;
  let base: string;
  let answer: string;

  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const failure = s3Rejection;

  it('well-formed counts pass', async () => {
    answer = JSON.stringify({ freed: 2 });
    expect(await new HttpBlobCollector(() => base, 'token').collect([1, 2])).to.equal(2);
    answer = JSON.stringify({ aborted: 3 });
    expect(await new HttpUploadExpirer(() => base, 'token').abortBucketUploads(7)).to.equal(3);
  });

  it('a count of another shape, or no JSON, is InternalError naming the field', async () => {
    answer = JSON.stringify({ freed: 'two' });
    const err = await failure(new HttpBlobCollector(() => base, 'token').collect([1, 2]));
    expect(err.code).to.equal('InternalError');
    expect(err.message).to.include('blob GC').and.include('freed');
    answer = JSON.stringify({});
    expect(
      (await failure(new HttpUploadExpirer(() => base, 'token').expireUploads({ id: 1, name: 'b', owner: 'alice', backend: { kind: 'fs' } }, '', new Date())))
        .message,
    ).to.include('aborted');
    answer = 'not json';
    expect((await failure(new HttpUploadExpirer(() => base, 'token').abortBucketUploads(7))).code).to.equal('InternalError');
  });
});
