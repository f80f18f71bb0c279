import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { DataPlaneClient } from '../../images/gateway/src/clients/data-plane.js';
import { BUCKET_HEADER, readWireHeader, SOURCE_BUCKET_HEADER, type BucketInfo } from '../../images/object-model/src/index.js';

/**
 * One resolution per request (hack/adr/0007-bucket-resolution.md): the gateway hands the data plane the
 * bucket record it authorised a read against, so the data plane serves that bucket and no other of its name.
 */
describe('gateway data-plane client: the resolved bucket travels with reads and multipart writes', function () {
  this.timeout(30_000);
  let server: http.Server;
  let client: DataPlaneClient;
  const seen: Array<string | undefined> = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.headers[BUCKET_HEADER.name] as string | undefined);
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'NoSuchKey', message: 'no' } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new DataPlaneClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'token');
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('GET and HEAD send x-strata-bucket with the record (none without one)', async () => {
    const record: BucketInfo = { id: 7, name: 'photos', owner: 'alice', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
    for (const method of ['GET', 'HEAD'] as const) {
      await client.getObject('photos', 'k', { method, bucketRecord: record }).catch(() => undefined);
    }
    await client.getObject('photos', 'k', { method: 'GET' }).catch(() => undefined);
    expect(seen).to.have.length(3);
    for (const sent of seen.slice(0, 2)) {
      expect(readWireHeader(BUCKET_HEADER, sent)).to.deep.equal({ id: 7, name: 'photos', owner: 'alice', backend: { kind: 'fs' } });
    }
    expect(seen[2]).to.equal(undefined);
  });

  it('multipart create and part uploads send x-strata-bucket with the record', async () => {
    const record: BucketInfo = { id: 8, name: 'videos', owner: 'bob', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
    seen.length = 0;
    await client.createMultipart('videos', 'k', { owner: 'bob', bucketRecord: record }).catch(() => undefined);
    await client.uploadPart('videos', 'k', 'u1', 1, { contentLength: 3, bucketRecord: record }, Readable.from([Buffer.from('abc')])).catch(() => undefined);
    expect(seen.map((sent) => readWireHeader(BUCKET_HEADER, sent))).to.deep.equal([
      { id: 8, name: 'videos', owner: 'bob', backend: { kind: 'fs' } },
      { id: 8, name: 'videos', owner: 'bob', backend: { kind: 'fs' } },
    ]);
  });

  it('multipart listings, completion and abort, and a direct URL send x-strata-bucket with the record', async () => {
    const record: BucketInfo = { id: 11, name: 'videos', owner: 'bob', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
    seen.length = 0;
    await client.listParts('videos', 'k', 'u1', {}, record).catch(() => undefined);
    await client.completeMultipart('videos', 'k', 'u1', [{ partNumber: 1, etag: 'e' }], undefined, undefined, record).catch(() => undefined);
    await client.abortMultipart('videos', 'k', 'u1', record).catch(() => undefined);
    await client.listUploads('videos', {}, record).catch(() => undefined);
    await client.directUrl('videos', 'k', 60, record).catch(() => undefined);
    expect(seen.map((sent) => readWireHeader(BUCKET_HEADER, sent))).to.deep.equal(
      Array(5).fill({ id: 11, name: 'videos', owner: 'bob', backend: { kind: 'fs' } }),
    );
  });

  it('a copy sends the destination record in x-strata-bucket and the source one in x-strata-source-bucket', async () => {
    const destination: BucketInfo = { id: 9, name: 'dst', owner: 'bob', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
    const source: BucketInfo = { ...destination, id: 10, name: 'src' };
    const headers: http.IncomingHttpHeaders[] = [];
    server.removeAllListeners('request');
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      headers.push(req.headers);
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'NoSuchKey', message: 'no' } }));
    });
    await client
      .copyObject('dst', 'k', {
        owner: 'bob',
        sourceBucket: 'src',
        sourceKey: 'k',
        metadataDirective: 'COPY',
        taggingDirective: 'COPY',
        bucketRecord: destination,
        sourceBucketRecord: source,
      })
      .catch(() => undefined);
    expect(readWireHeader(BUCKET_HEADER, headers[0]![BUCKET_HEADER.name] as string)).to.include({ id: 9, name: 'dst' });
    expect(readWireHeader(SOURCE_BUCKET_HEADER, headers[0]![SOURCE_BUCKET_HEADER.name] as string)).to.include({ id: 10, name: 'src' });
  });
});
