import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { S3Error } from '../../images/object-model/src/index.js';
import { codeOf, handlerApp, handlerFixture } from './handler-app.js';

/** The gateway's bucket handlers, DeleteObjects and tagging against a fake object layer. */
describe('gateway handlers: buckets, DeleteObjects and tags, against a fake ObjectLayer', () => {
  const fx = handlerFixture((layer) => {
    layer.addBucket('mine', 'alice');
    layer.addBucket('theirs', 'bob');
  });

  it("ListBuckets lists the caller's buckets only, as the object layer answers them for that owner", async () => {
    fx.layer.addBucket('also-mine', 'alice');
    const r = await fx.app.fetch('GET', '/');
    const xml = await r.text();
    expect(r.status).to.equal(200);
    expect(fx.layer.callsOf('listBuckets')).to.deep.equal([['alice', { prefix: '' }]]);
    expect([...xml.matchAll(/<Name>([^<]*)<\/Name>/g)].map((m) => m[1])).to.deep.equal(['also-mine', 'mine']);
  });

  it('ListBuckets asks the object layer for one page (one bucket more tells that another follows) and answers its ContinuationToken', async () => {
    for (const name of ['page-a', 'page-b', 'page-c']) fx.layer.addBucket(name, 'alice');
    const names = (xml: string) => [...xml.matchAll(/<Name>([^<]*)<\/Name>/g)].map((m) => m[1]);
    const first = await (await fx.app.fetch('GET', '/?max-buckets=2&prefix=page-')).text();
    expect(names(first)).to.deep.equal(['page-a', 'page-b']);
    const token = /<ContinuationToken>([^<]*)<\/ContinuationToken>/.exec(first)?.[1];
    expect(token).to.equal(Buffer.from('page-b').toString('base64url'));
    const last = await (await fx.app.fetch('GET', `/?max-buckets=2&prefix=page-&continuation-token=${token}`)).text();
    expect([names(last), last.includes('<ContinuationToken>')]).to.deep.equal([['page-c'], false]);
    expect(fx.layer.callsOf('listBuckets').map((c) => c[1])).to.deep.equal([
      { prefix: 'page-', limit: 3 },
      { prefix: 'page-', after: 'page-b', limit: 3 },
    ]);
  });

  it('CreateBucket refuses names S3 refuses and names of the gateway routes before the object layer is called; a second create by its owner succeeds', async () => {
    for (const name of ['Upper', 'ab', 'a..b', '10.0.0.1', 'admin']) {
      const r = await fx.app.fetch('PUT', `/${name}`);
      expect([r.status, codeOf(await r.text())], name).to.deep.equal([400, 'InvalidBucketName']);
    }
    expect(fx.layer.callsOf('createBucket')).to.deep.equal([]);
    expect((await fx.app.fetch('PUT', '/fresh')).status).to.equal(200);
    expect(fx.layer.callsOf('createBucket')[0]!.slice(0, 2)).to.deep.equal(['fresh', 'alice']);
    expect((await fx.app.fetch('PUT', '/fresh')).status).to.equal(200);
    const taken = await fx.app.fetch('PUT', '/theirs');
    expect([taken.status, codeOf(await taken.text())]).to.deep.equal([409, 'BucketAlreadyExists']);
  });

  it("CreateBucket refuses a LocationConstraint as S3's us-east-1 does: us-east-1 itself is InvalidLocationConstraint, another region IllegalLocationConstraintException", async () => {
    const conf = (region: string) => ({
      body: `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>${region}</LocationConstraint></CreateBucketConfiguration>`,
    });
    const east = await fx.app.fetch('PUT', '/in-east', conf('us-east-1'));
    expect([east.status, codeOf(await east.text())]).to.deep.equal([400, 'InvalidLocationConstraint']);
    const west = await fx.app.fetch('PUT', '/in-west', conf('eu-west-1'));
    expect([west.status, codeOf(await west.text())]).to.deep.equal([400, 'IllegalLocationConstraintException']);
    expect(fx.layer.callsOf('createBucket')).to.deep.equal([]);
    // An empty one is us-east-1 unsaid.
    expect((await fx.app.fetch('PUT', '/unsaid', conf(''))).status).to.equal(200);
  });

  it("in another region (STRATA_REGION), CreateBucket takes that region's LocationConstraint (as the SDKs send it there) and GetBucketLocation names it", async () => {
    const app = await handlerApp(fx.layer, 'alice', { region: 'eu-central-1' });
    try {
      const conf = (region: string) => ({
        body: `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>${region}</LocationConstraint></CreateBucketConfiguration>`,
      });
      expect((await app.fetch('PUT', '/in-frankfurt', conf('eu-central-1'))).status).to.equal(200);
      const location = await (await app.fetch('GET', '/in-frankfurt?location')).text();
      expect(/<LocationConstraint[^>]*>([^<]*)<\/LocationConstraint>/.exec(location)?.[1]).to.equal('eu-central-1');
      // us-east-1 is never a valid constraint; another region does not fit this endpoint.
      for (const [other, code] of [
        ['us-east-1', 'InvalidLocationConstraint'],
        ['eu-west-1', 'IllegalLocationConstraintException'],
      ]) {
        const r = await app.fetch('PUT', `/not-${other}`, conf(other!));
        expect([r.status, codeOf(await r.text())], other).to.deep.equal([400, code]);
      }
      expect(fx.layer.callsOf('createBucket').map((c) => c[0])).to.deep.equal(['in-frankfurt']);
    } finally {
      await app.close();
    }
  });

  it('CreateBucket makes the bucket with its ownership controls and ACL at once: no failure after the create can leave a bucket without them', async () => {
    // Were they written by later calls, a failure there (here: every configuration write fails) left a
    // BucketOwnerEnforced bucket behind a 503, and the client's retry got a 200 for it (us-east-1's no-op).
    Object.assign(fx.layer, { putBucketConfig: () => Promise.reject(new S3Error('ServiceUnavailable')) });
    const headers = { 'x-amz-object-ownership': 'ObjectWriter', 'x-amz-acl': 'public-read' };
    expect((await fx.app.fetch('PUT', '/at-once', { headers })).status).to.equal(200);
    const made = fx.layer.buckets.get('at-once')!;
    expect(made.ownership).to.deep.equal([{ objectOwnership: 'ObjectWriter' }]);
    expect(made.acl).to.deep.include({ grantee: { group: 'http://acs.amazonaws.com/groups/global/AllUsers' }, permission: 'READ' });
  });

  it('DeleteObjects passes each key with its conditions and renders deleted keys and errors (only errors when Quiet)', async () => {
    const meta = fx.layer.store('mine', 'a', Buffer.from('a'));
    fx.layer.store('mine', 'b', Buffer.from('b'));
    const doc = (quiet: boolean, objects: string) => `<Delete>${quiet ? '<Quiet>true</Quiet>' : ''}${objects}</Delete>`;
    const body = doc(false, `<Object><Key>a</Key><ETag>"${meta.etag}"</ETag></Object><Object><Key>b</Key><ETag>"nope"</ETag></Object>`);
    const r = await fx.app.fetch('POST', '/mine?delete', { headers: { 'content-md5': createHash('md5').update(body).digest('base64') }, body });
    const xml = await r.text();
    expect(r.status).to.equal(200);
    expect(fx.layer.callsOf('deleteObjects')).to.deep.equal([
      [
        'mine',
        [
          { key: 'a', ifMatch: `"${meta.etag}"` },
          { key: 'b', ifMatch: '"nope"' },
        ],
      ],
    ]);
    expect(xml).to.contain('<Deleted><Key>a</Key></Deleted>').and.contain('<Key>b</Key><Code>PreconditionFailed</Code>');
    const quiet = await (await fx.app.fetch('POST', '/mine?delete', { body: doc(true, '<Object><Key>b</Key></Object>') })).text();
    expect(quiet).to.not.contain('<Deleted>');
    const tooMany = await fx.app.fetch('POST', '/mine?delete', { body: doc(false, '') });
    expect(codeOf(await tooMany.text())).to.equal('MalformedXML');
  });

  it("GetObjectTagging renders the object's tags from its metadata; a missing key is NoSuchKey", async () => {
    fx.layer.store('mine', 't', Buffer.from('t'), { tags: [{ key: 'team', value: 'web' }] });
    const xml = await (await fx.app.fetch('GET', '/mine/t?tagging')).text();
    expect(xml).to.contain('<Tag><Key>team</Key><Value>web</Value></Tag>');
    expect(fx.layer.callsOf('headObject')).to.deep.equal([['mine', 't']]);
    const missing = await fx.app.fetch('GET', '/mine/none?tagging');
    expect([missing.status, codeOf(await missing.text())]).to.deep.equal([404, 'NoSuchKey']);
  });

  it("reads of configurations no bucket has answer S3's unset answers, for the owner only; their writes stay NotImplemented", async () => {
    const missing: [string, string][] = [
      ['policy', 'NoSuchBucketPolicy'],
      ['policyStatus', 'NoSuchBucketPolicy'],
      ['website', 'NoSuchWebsiteConfiguration'],
      ['replication', 'ReplicationConfigurationNotFoundError'],
      ['object-lock', 'ObjectLockConfigurationNotFoundError'],
    ];
    for (const [sub, code] of missing) {
      const r = await fx.app.fetch('GET', `/mine?${sub}`);
      expect([r.status, codeOf(await r.text())], sub).to.deep.equal([404, code]);
    }
    const empty: [string, string][] = [
      [
        'requestPayment',
        '<RequestPaymentConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Payer>BucketOwner</Payer></RequestPaymentConfiguration>',
      ],
      ['accelerate', '<AccelerateConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></AccelerateConfiguration>'],
      ['notification', '<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>'],
    ];
    for (const [sub, xml] of empty) {
      const r = await fx.app.fetch('GET', `/mine?${sub}`);
      expect([r.status, (await r.text()).replace(/^<\?xml[^>]*>\s*/, '')], sub).to.deep.equal([200, xml]);
    }
    for (const target of ['/theirs?policy', '/theirs?website']) {
      const r = await fx.app.fetch('GET', target);
      expect([r.status, codeOf(await r.text())], target).to.deep.equal([403, 'AccessDenied']);
    }
    const absent = await fx.app.fetch('GET', '/nobucket?policy');
    expect([absent.status, codeOf(await absent.text())]).to.deep.equal([404, 'NoSuchBucket']);
    for (const [method, target] of [
      ['PUT', '/mine?policy'],
      ['DELETE', '/mine?logging'],
    ] as const) {
      const r = await fx.app.fetch(method, target, { body: method === 'PUT' ? '{}' : undefined });
      expect([r.status, codeOf(await r.text())], `${method} ${target}`).to.deep.equal([501, 'NotImplemented']);
    }
  });

  it("deletes of configurations no bucket has answer S3's 204, for the owner only, and leave the bucket in place", async () => {
    // (Ownership controls, the public access block and encryption are real configurations: test/e2e/access-control.test.ts, encryption.test.ts.)
    const deletable = ['policy', 'website', 'replication'];
    for (const sub of deletable) {
      const r = await fx.app.fetch('DELETE', `/mine?${sub}`);
      expect([r.status, await r.text()], sub).to.deep.equal([204, '']);
      const theirs = await fx.app.fetch('DELETE', `/theirs?${sub}`);
      expect([theirs.status, codeOf(await theirs.text())], `theirs ${sub}`).to.deep.equal([403, 'AccessDenied']);
      const absent = await fx.app.fetch('DELETE', `/nobucket?${sub}`);
      expect([absent.status, codeOf(await absent.text())], `absent ${sub}`).to.deep.equal([404, 'NoSuchBucket']);
    }
    expect(fx.layer.callsOf('deleteBucket')).to.deep.equal([]);
    expect((await fx.app.fetch('HEAD', '/mine')).status).to.equal(200);
  });
});
