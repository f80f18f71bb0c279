import {
  CreateBucketCommand,
  GetBucketOwnershipControlsCommand,
  GetObjectAclCommand,
  PutBucketAclCommand,
  PutObjectCommand,
  type ObjectOwnership,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli, run } from './support/cli.js';
import { platformHooks, type TestPlatform } from './support/platform.js';
import { bucketName, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';

const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';

/** A platform whose buckets are made under `ownership` unless the CreateBucket names one (STRATA_DEFAULT_OBJECT_OWNERSHIP). */
function platformWithDefault(ownership: ObjectOwnership | undefined): { p: TestPlatform; s3: () => S3Client } {
  const p = platformHooks(ownership ? { defaultObjectOwnership: ownership } : {});
  let client: S3Client | undefined;
  after(() => client?.destroy());
  return { p, s3: () => (client ??= sdkClient(p.endpoint)) };
}

/** Makes a bucket (with `ownership` in its CreateBucket when given) and answers its name and ownership controls. */
async function makeBucket(s3: S3Client, ownership?: ObjectOwnership): Promise<{ name: string; ownership: string | undefined }> {
  const name = bucketName('own');
  await s3.send(new CreateBucketCommand({ Bucket: name, ...(ownership ? { ObjectOwnership: ownership } : {}) }));
  const controls = await s3.send(new GetBucketOwnershipControlsCommand({ Bucket: name }));
  return { name, ownership: controls.OwnershipControls?.Rules?.[0]?.ObjectOwnership };
}

/** `aws s3 cp --acl public-read` of a small file into a fresh bucket made by `aws s3 mb`, then an anonymous curl of it. */
async function cliPublicRead(endpoint: string): Promise<{ cp: { code: number; stderr: string }; curl: string }> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'strata-ownership-'));
  try {
    const aws = awsCli(endpoint, home);
    const bucket = bucketName('own-cli');
    const mb = await aws('s3', 'mb', `s3://${bucket}`);
    expect(mb.code, mb.stderr).to.equal(0);
    const file = path.join(home, 'hello.txt');
    await writeFile(file, 'hello, world');
    const cp = await aws('s3', 'cp', file, `s3://${bucket}/public.txt`, '--acl', 'public-read');
    const curl = await run('curl', ['-s', '-w', '\n%{http_code}', `${endpoint}/${bucket}/public.txt`], { PATH: process.env.PATH });
    return { cp, curl: curl.stdout };
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

/**
 * STRATA_DEFAULT_OBJECT_OWNERSHIP: the ownership controls of a bucket whose CreateBucket names none. S3's default
 * (BucketOwnerEnforced: ACLs off) unless set; ObjectWriter or BucketOwnerPreferred turn ACLs on for new buckets,
 * as MinIO and radosgw users expect. A CreateBucket's own `x-amz-object-ownership` still wins.
 */
describe('e2e: the default object ownership of new buckets (STRATA_DEFAULT_OBJECT_OWNERSHIP)', function () {
  this.timeout(180_000);

  describe('unset: BucketOwnerEnforced, as S3', () => {
    const { p, s3 } = platformWithDefault(undefined);

    it('a fresh bucket refuses ACLs (AccessControlListNotSupported, InvalidBucketAclWithObjectOwnership); ObjectWriter in the CreateBucket wins', async () => {
      const plain = await makeBucket(s3());
      expect(plain.ownership).to.equal('BucketOwnerEnforced');
      expect(await s3Failure(s3().send(new PutObjectCommand({ Bucket: plain.name, Key: 'k', Body: 'x', ACL: 'public-read' })))).to.deep.equal({
        name: 'AccessControlListNotSupported',
        status: 400,
      });
      expect((await s3Failure(s3().send(new CreateBucketCommand({ Bucket: bucketName('own'), ACL: 'public-read' })))).name).to.equal(
        'InvalidBucketAclWithObjectOwnership',
      );
      const writer = await makeBucket(s3(), 'ObjectWriter');
      expect(writer.ownership).to.equal('ObjectWriter');
      await s3().send(new PutObjectCommand({ Bucket: writer.name, Key: 'k', Body: 'x', ACL: 'public-read' }));
      const acl = await s3().send(new GetObjectAclCommand({ Bucket: writer.name, Key: 'k' }));
      expect(acl.Grants?.some((g) => g.Grantee?.URI === ALL_USERS && g.Permission === 'READ')).to.equal(true);
    });

    it('`aws s3 cp --acl public-read` on a fresh bucket fails with AccessControlListNotSupported; the object is not readable anonymously', async () => {
      const { cp, curl } = await cliPublicRead(p.endpoint);
      expect(cp.code).to.not.equal(0);
      expect(cp.stderr).to.contain('AccessControlListNotSupported');
      expect(curl.endsWith('\n403') && s3ErrorOf(curl).code === 'AccessDenied', curl).to.equal(true);
    });
  });

  describe('ObjectWriter (as radosgw)', () => {
    const { p, s3 } = platformWithDefault('ObjectWriter');

    it('`aws s3 cp --acl public-read` on a fresh bucket, then an anonymous curl answers the bytes', async () => {
      const { cp, curl } = await cliPublicRead(p.endpoint);
      expect(cp.code, cp.stderr).to.equal(0);
      expect(curl).to.equal('hello, world\n200');
    });

    it('a fresh bucket is ObjectWriter and takes ACLs (CreateBucket with one, PutBucketAcl); BucketOwnerEnforced in the CreateBucket wins', async () => {
      const plain = await makeBucket(s3());
      expect(plain.ownership).to.equal('ObjectWriter');
      await s3().send(new PutBucketAclCommand({ Bucket: plain.name, ACL: 'public-read' }));
      const withAcl = bucketName('own');
      await s3().send(new CreateBucketCommand({ Bucket: withAcl, ACL: 'public-read' }));
      const listed = await fetch(`${p.endpoint}/${withAcl}?list-type=2`);
      expect(listed.status).to.equal(200);

      const enforced = await makeBucket(s3(), 'BucketOwnerEnforced');
      expect(enforced.ownership).to.equal('BucketOwnerEnforced');
      expect((await s3Failure(s3().send(new PutObjectCommand({ Bucket: enforced.name, Key: 'k', Body: 'x', ACL: 'public-read' })))).name).to.equal(
        'AccessControlListNotSupported',
      );
    });
  });

  describe('BucketOwnerPreferred', () => {
    const { s3 } = platformWithDefault('BucketOwnerPreferred');

    it('a fresh bucket is BucketOwnerPreferred and honours ACLs on its objects', async () => {
      const plain = await makeBucket(s3());
      expect(plain.ownership).to.equal('BucketOwnerPreferred');
      await s3().send(new PutObjectCommand({ Bucket: plain.name, Key: 'k', Body: 'x', ACL: 'public-read' }));
      const acl = await s3().send(new GetObjectAclCommand({ Bucket: plain.name, Key: 'k' }));
      expect(acl.Grants?.some((g) => g.Grantee?.URI === ALL_USERS && g.Permission === 'READ')).to.equal(true);
    });
  });
});
