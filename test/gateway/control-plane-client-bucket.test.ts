import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { ControlPlaneClient } from '../../images/gateway/src/clients/control-plane.js';
import { BUCKET_HEADER, readWireHeader, type BucketInfo } from '../../images/object-model/src/index.js';

/**
 * One resolution per request (hack/adr/0007-bucket-resolution.md): the gateway hands the control plane the
 * bucket record it authorised a call against, so that the control plane serves that bucket by its id.
 */
describe('gateway control-plane client: the resolved bucket travels with every call about a bucket', function () {
  this.timeout(30_000);
  let server: http.Server;
  let client: ControlPlaneClient;
  const seen: Array<{ call: string; sent: string | undefined }> = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push({ call: `${req.method} ${req.url}`, sent: req.headers[BUCKET_HEADER.name] as string | undefined });
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'NoSuchKey', message: 'no' } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new ControlPlaneClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'token');
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('listings, metadata, tags, ACLs, deletes, configurations and DeleteBucket send x-strata-bucket (none without a record)', async () => {
    const record: BucketInfo = { id: 7, name: 'photos', owner: 'alice', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
    const calls = (r?: BucketInfo) => [
      client.listObjects('photos', {}, r),
      client.headObject('photos', 'k', r),
      client.objectParts('photos', 'k', r),
      client.putObjectTags('photos', 'k', [], r),
      client.putObjectAcl('photos', 'k', undefined, r),
      client.deleteObject('photos', 'k', undefined, r),
      client.deleteObjects('photos', [{ key: 'k' }], r),
      client.getBucketConfig('photos', 'tags', r),
      client.putBucketConfig('photos', 'tags', [{ key: 'a', value: 'b' }], r),
      client.putBucketConfig('photos', 'tags', undefined, r),
      client.deleteBucket('photos', r),
    ];
    for (const call of calls(record)) await call.catch(() => undefined);
    expect(seen).to.have.length(11);
    for (const { call, sent } of seen)
      expect(readWireHeader(BUCKET_HEADER, sent), call).to.deep.equal({ id: 7, name: 'photos', owner: 'alice', backend: { kind: 'fs' } });
    seen.length = 0;
    for (const call of calls()) await call.catch(() => undefined);
    expect(seen.map((s) => s.sent)).to.deep.equal(Array(11).fill(undefined));
  });
});
