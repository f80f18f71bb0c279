import { createHash } from 'node:crypto';
import { expect } from 'chai';
import type { BucketInfo, ObjectLayer, ObjectMeta } from '../../images/object-model/src/index.js';
import { handlerApp, type HandlerApp } from './handler-app.js';

/**
 * One resolution per request (hack/adr/0007-bucket-resolution.md): every object-layer call an S3 handler
 * makes about a bucket carries the bucket record the handler authorised the request against, so that the
 * plane behind it serves that bucket and resolves no name again.
 */
describe('gateway handlers: every call about a bucket carries the record the request was authorised against', function () {
  this.timeout(30_000);
  const record: BucketInfo = { id: 42, name: 'photos', owner: 'alice', createdAt: '2030-01-01T00:00:00.000Z', backend: { kind: 'fs' } };
  const meta: ObjectMeta = {
    bucket: 'photos',
    key: 'k',
    size: 3,
    etag: 'abc',
    md5: null,
    contentType: 'text/plain',
    userMetadata: {},
    lastModified: '2030-01-01T00:00:00.000Z',
  };
  /** Each call's method and arguments, getBucket (the resolution itself) left out. */
  const calls: Array<{ method: string; args: unknown[] }> = [];
  const answers: Partial<Record<keyof ObjectLayer, unknown>> = {
    listObjects: { objects: [meta], commonPrefixes: [], isTruncated: false },
    headObject: meta,
    getObject: { status: 200, object: meta, contentLength: 3 },
    objectParts: [],
    deleteObjects: { deleted: ['k'], errors: [] },
    getBucketConfig: [{ key: 'team', value: 'a' }],
    listParts: { parts: [], isTruncated: false, initiated: '2030-01-01T00:00:00.000Z', owner: 'alice' },
    completeMultipart: meta,
    listUploads: { uploads: [], commonPrefixes: [], isTruncated: false },
  };
  const layer = new Proxy({} as Partial<ObjectLayer>, {
    get: (_target, name) => {
      if (name === 'getBucket') return () => Promise.resolve(record);
      if (typeof name !== 'string' || name === 'then') return undefined;
      return (...args: unknown[]) => {
        calls.push({ method: name, args });
        return Promise.resolve(answers[name as keyof ObjectLayer]);
      };
    },
  });
  let app: HandlerApp;
  before(async () => {
    app = await handlerApp(layer);
  });
  after(() => app.close());

  const md5 = (body: string) => ({ 'content-md5': createHash('md5').update(body).digest('base64') });
  const tagging = '<Tagging><TagSet><Tag><Key>team</Key><Value>a</Value></Tag></TagSet></Tagging>';
  const remove = '<Delete><Object><Key>k</Key></Object></Delete>';
  const complete = '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part></CompleteMultipartUpload>';
  const requests: Array<[string, string, { headers?: Record<string, string>; body?: string }?]> = [
    ['GET', '/photos?list-type=2'],
    ['GET', '/photos'],
    ['GET', '/photos?versions'],
    ['GET', '/photos/k?tagging'],
    ['PUT', '/photos/k?tagging', { headers: md5(tagging), body: tagging }],
    ['DELETE', '/photos/k?tagging'],
    ['GET', '/photos/k?acl'],
    ['PUT', '/photos/k?acl', { headers: { 'x-amz-acl': 'private' } }],
    ['GET', '/photos/k?attributes', { headers: { 'x-amz-object-attributes': 'ETag' } }],
    ['DELETE', '/photos/k'],
    ['POST', '/photos?delete', { headers: md5(remove), body: remove }],
    ['PUT', '/photos?tagging', { headers: md5(tagging), body: tagging }],
    ['GET', '/photos?tagging'],
    ['DELETE', '/photos?tagging'],
    ['GET', '/photos/k?uploadId=u1'],
    ['POST', '/photos/k?uploadId=u1', { body: complete }],
    ['DELETE', '/photos/k?uploadId=u1'],
    ['GET', '/photos?uploads'],
    ['DELETE', '/photos'],
  ];

  it('listings, tags, ACLs, attributes, deletes, bucket configurations, multipart listing, completion and abort, DeleteBucket', async () => {
    for (const [method, target, init] of requests) {
      const res = await app.fetch(method, target, init);
      expect(res.status, `${method} ${target}: ${await res.text()}`).to.be.lessThan(300);
    }
    // (A read carries it in its input, as getObject's bucketRecord.)
    const carries = (a: unknown) => a === record || (typeof a === 'object' && a !== null && 'bucketRecord' in a && a.bucketRecord === record);
    const without = calls.filter((c) => !c.args.some(carries)).map((c) => c.method);
    expect(without, 'calls without the record').to.deep.equal([]);
    expect(new Set(calls.map((c) => c.method))).to.deep.equal(
      new Set([
        'listObjects',
        'headObject',
        'getObject',
        'putObjectTags',
        'putObjectAcl',
        'deleteObject',
        'deleteObjects',
        'putBucketConfig',
        'getBucketConfig',
        'listParts',
        'completeMultipart',
        'abortMultipart',
        'listUploads',
        'deleteBucket',
      ]),
    );
  });
});
