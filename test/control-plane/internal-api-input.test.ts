import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import { createLogger, SecretBox } from '../../images/service-kit/src/index.js';
import { InMemoryCache } from '../../images/service-kit/src/memory-cache.js';
import { internalErrorHandler } from '../../images/object-model/src/index.js';
import { controlPlaneRoutes, type RouteDeps } from '../../images/control-plane/src/http/routes.js';
import type { Bucket } from '../../images/control-plane/src/metadata/store.js';

const BUCKET: Bucket = { id: 1, name: 'photos', owner: 'alice', backend: { kind: 'fs' }, createdAt: '2026-01-02T03:04:05.000Z' };

/**
 * The control plane's internal routes read their input through one reader each (object-model
 * control-plane-api.ts): input of the wrong shape is a 400-class S3 error that says what is wrong, and
 * never reaches the store (not even the bucket's lookup: input is read first). The store here records what reaches it.
 */
describe('control plane internal API: input is read by one reader per route', () => {
  let server: http.Server;
  let base: string;
  const reached: string[] = [];

  before(async () => {
    const touch =
      (name: string, answer: unknown = undefined) =>
      async () => {
        reached.push(name);
        return answer;
      };
    const store = {
      buckets: {
        get: touch('buckets.get', BUCKET),
        exists: touch('buckets.exists', true),
        create: touch('buckets.create'),
        setConfig: touch('buckets.setConfig'),
      },
      objects: {
        list: touch('objects.list', { objects: [], commonPrefixes: [], isTruncated: false }),
        setTags: touch('objects.setTags', true),
        setAcl: touch('objects.setAcl', true),
      },
      recycleBin: {
        recycle: touch('recycleBin.recycle'),
        recycleMany: touch('recycleBin.recycleMany', ['a.txt']),
        list: touch('recycleBin.list', { objects: [] }),
        restore: touch('recycleBin.restore'),
      },
    };
    const deps = {
      store,
      users: { createUser: touch('users.createUser', {}), verify: touch('users.verify', {}) },
      cache: new InMemoryCache(),
      collector: { collect: async () => 0 },
      uploads: { abortBucketUploads: async () => undefined },
      secrets: new SecretBox('test-server-secret-key'),
      purge: touch('purge', {}),
      clock: () => new Date('2030-01-01T00:00:00Z'),
      bucketNameHoldMs: 0,
      logger: createLogger('cp-input-test', 'silent'),
    } as unknown as RouteDeps;
    const app = express();
    app.use('/internal', express.json(), controlPlaneRoutes(deps));
    app.use(internalErrorHandler(deps.logger));
    server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    reached.length = 0;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, ...(text ? (JSON.parse(text) as { error?: { code: string; message: string } }) : {}) };
  };

  const refusals: Array<[string, string, unknown, number, string, RegExp]> = [
    ['POST', '/internal/users', { username: 7, password: 'long-enough' }, 400, 'InvalidArgument', /username must be a string/],
    ['POST', '/internal/users/verify', { username: 'alice' }, 400, 'InvalidArgument', /password must be a string/],
    ['PUT', '/internal/buckets/newbucket', {}, 400, 'InvalidArgument', /owner is required/],
    [
      'PUT',
      '/internal/buckets/newbucket',
      { owner: 'alice', backend: { kind: 'tape' } },
      400,
      'InvalidArgument',
      /backend.kind must be one of fs, minio, cloud/,
    ],
    ['PUT', '/internal/buckets/newbucket', { owner: 'alice', ownership: [] }, 400, 'MalformedXML', /ownership must be a list of one ownership rule/],
    ['PUT', '/internal/buckets/newbucket', { owner: 'alice', acl: 'public-read' }, 400, 'MalformedXML', /acl must be a list of 0 to 102 grants/],
    ['PUT', '/internal/buckets/photos/cors', { rules: [{ allowedOrigins: '*' }] }, 400, 'MalformedXML', /1 to 100 cors rules/],
    ['PUT', '/internal/buckets/photos/ownership', { rules: [] }, 400, 'MalformedXML', /1 to 1 ownership rules/],
    ['GET', '/internal/buckets/photos/objects?maxKeys=ten', undefined, 400, 'InvalidArgument', /Provided max-keys not an integer/],
    ['GET', '/internal/buckets/photos/objects?prefix=a&prefix=b', undefined, 400, 'InvalidArgument', /prefix is not valid in a listing/],
    ['PUT', '/internal/buckets/photos/objects/a.txt/tagging', { tags: 'x' }, 400, 'InvalidTag', /tags must be a list/],
    // Before the readers: TypeErrors of the route (500 InternalError) for each of these three.
    ['PUT', '/internal/buckets/photos/objects/a.txt/acl', {}, 400, 'MalformedACLError', /acl must be \{owner, grants\}/],
    ['PUT', '/internal/buckets/photos/objects/a.txt/acl', { acl: 'private' }, 400, 'MalformedACLError', /acl must be \{owner, grants\}/],
    ['PUT', '/internal/buckets/photos/objects/a.txt/acl', { acl: { owner: 'alice' } }, 400, 'MalformedACLError', /acl must be \{owner, grants\}/],
    ['DELETE', '/internal/buckets/photos/objects/a.txt?size=-1', undefined, 400, 'InvalidArgument', /size must be a whole number/],
    ['DELETE', '/internal/buckets/photos/objects/a.txt?lastModifiedTime=soon', undefined, 400, 'InvalidArgument', /lastModifiedTime must be a timestamp/],
    ['POST', '/internal/buckets/photos/delete-objects', { objects: 'a.txt' }, 400, 'MalformedXML', /at most 1000 objects/],
    ['GET', '/internal/recycle-bin?limit=0', undefined, 400, 'InvalidArgument', /limit must be a whole number from 1 to 1000/],
    ['GET', '/internal/recycle-bin?after=bm90LWEtdG9rZW4', undefined, 400, 'InvalidArgument', /continuation token/],
    ['POST', '/internal/recycle-bin/abc/restore', {}, 400, 'InvalidArgument', /positive integers/],
    // Before the readers: an owner that is not a string was dropped, and the restore went on for any owner.
    ['POST', '/internal/recycle-bin/5/restore', { owner: ['alice'] }, 400, 'InvalidArgument', /owner must be a string/],
    // Before the readers: a `now` that is not a string was dropped, and the purge ran as of the clock.
    ['POST', '/internal/purge', { now: 12 }, 400, 'InvalidArgument', /now must be an ISO 8601 time/],
    ['POST', '/internal/purge', { now: 'tomorrow' }, 400, 'InvalidArgument', /now must be an ISO 8601 time/],
  ];
  for (const [method, path, body, status, code, message] of refusals) {
    it(`${method} ${path} ${JSON.stringify(body) ?? ''} → ${status} ${code}, the store untouched`, async () => {
      const r = await call(method, path, body);
      expect(r.status).to.equal(status);
      expect(r.error?.code).to.equal(code);
      expect(r.error?.message).to.match(message);
      expect(reached).to.deep.equal([]);
    });
  }

  it('well-formed input reaches the store as typed values (defaults filled in)', async () => {
    expect((await call('GET', '/internal/buckets/photos/objects?max-keys=5000&start-after=k')).status).to.equal(200);
    expect((await call('PUT', '/internal/buckets/photos/objects/a.txt/acl', { acl: null })).status).to.equal(204);
    expect((await call('POST', '/internal/purge', {})).status).to.equal(202);
    // (The bucket's lookup, and the check that an empty page's bucket is still there, are not what this is about.)
    expect(reached.filter((r) => r !== 'buckets.get' && r !== 'buckets.exists')).to.deep.equal(['objects.list', 'objects.setAcl', 'purge']);
  });

  it('one wrong entry of a delete-objects body is that entry’s error, not the request’s', async () => {
    const r = (await call('POST', '/internal/buckets/photos/delete-objects', {
      objects: [{ key: 'a.txt' }, { key: 5 }, { key: 'b.txt', size: 'big' }],
    })) as unknown as { status: number; deleted: string[]; errors: Array<{ key: string; code: string }> };
    expect(r.status).to.equal(200);
    expect(r.deleted).to.deep.equal(['a.txt']);
    expect(r.errors.map((e) => [e.key, e.code])).to.deep.equal([
      ['5', 'InvalidObjectName'],
      ['b.txt', 'InvalidArgument'],
    ]);
  });
});
