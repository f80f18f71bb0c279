import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteBucketLifecycleCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutBucketLifecycleConfigurationCommand,
  PutObjectCommand,
  UploadPartCommand,
  type LifecycleRule,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expiryAfterDays } from '../../images/object-model/src/index.js';
import { awsCli, s3cmd } from './support/cli.js';
import { bucketName, describeWithBucket, login, newBucket, s3ErrorOf, s3Failure, sdkClient } from './support/s3.js';
import { adminPurge } from '../support/admin-jobs.js';

const DAY = 24 * 3600 * 1000;

describeWithBucket(
  "e2e: bucket lifecycle configuration (PutBucketLifecycleConfiguration and the daily job), and s3cmd's bucket-configuration commands",
  'life',
  (env, bucket) => {
    const rules: LifecycleRule[] = [
      { ID: 'old-logs', Filter: { Prefix: 'logs/' }, Status: 'Enabled', Expiration: { Days: 2 } },
      { ID: 'uploads', Filter: { Prefix: '' }, Status: 'Enabled', AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 } },
      { ID: 'big-tmp', Filter: { And: { Prefix: 'tmp/', ObjectSizeGreaterThan: 1024 } }, Status: 'Disabled', Expiration: { Days: 1 } },
    ];

    const rootBearer = async () => ({ authorization: `Bearer ${await login(env.p.endpoint)}` });

    it('the SDK puts, reads back and deletes a configuration; none is NoSuchLifecycleConfiguration', async () => {
      expect(await s3Failure(env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket })))).to.deep.equal({
        name: 'NoSuchLifecycleConfiguration',
        status: 404,
      });
      await env.s3.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: rules } }));
      const got = await env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }));
      expect(got.Rules).to.deep.equal(rules);
      await env.s3.send(new DeleteBucketLifecycleCommand({ Bucket: bucket }));
      expect((await s3Failure(env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket })))).name).to.equal('NoSuchLifecycleConfiguration');
      await env.s3.send(new DeleteBucketLifecycleCommand({ Bucket: bucket })); // nothing to delete: still 204
    });

    it('refuses bad configurations with S3 errors and keeps the one in place', async () => {
      await env.s3.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: rules } }));
      const put = (Rules: LifecycleRule[]) =>
        s3Failure(env.s3.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules } })));
      expect(await put([{ ID: 'zero', Filter: { Prefix: '' }, Status: 'Enabled', Expiration: { Days: 0 } }])).to.deep.equal({
        name: 'InvalidArgument',
        status: 400,
      });
      expect(await put([{ ID: 'cold', Filter: { Prefix: '' }, Status: 'Enabled', Transitions: [{ Days: 30, StorageClass: 'GLACIER' }] }])).to.deep.equal({
        name: 'NotImplemented',
        status: 501,
      });
      expect(await put([{ ID: 'noop', Filter: { Prefix: '' }, Status: 'Enabled' }])).to.deep.equal({ name: 'InvalidRequest', status: 400 });
      expect(
        await put([
          { ID: 'same', Filter: { Prefix: 'a' }, Status: 'Enabled', Expiration: { Days: 1 } },
          { ID: 'same', Filter: { Prefix: 'b' }, Status: 'Enabled', Expiration: { Days: 1 } },
        ]),
      ).to.deep.equal({ name: 'InvalidArgument', status: 400 });

      // Raw documents (Bearer): malformed XML, no integrity header, a wrong Content-MD5.
      const target = `${env.p.endpoint}/${bucket}?lifecycle`;
      const send = async (body: string, headers: Record<string, string>) => {
        const res = await fetch(target, { method: 'PUT', headers: { ...(await rootBearer()), ...headers }, body });
        return { status: res.status, code: s3ErrorOf(await res.text()).code };
      };
      const md5 = (s: string) => createHash('md5').update(s).digest('base64');
      const doc =
        '<LifecycleConfiguration><Rule><ID>x</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>';
      for (const bad of ['<LifecycleConfiguration><Rule>', 'not xml', '<Other/>', '<LifecycleConfiguration></LifecycleConfiguration>']) {
        expect(await send(bad, { 'content-md5': md5(bad) }), bad).to.deep.equal({ status: 400, code: 'MalformedXML' });
      }
      expect(await send(doc, {})).to.deep.equal({ status: 400, code: 'InvalidRequest' });
      expect(await send(doc, { 'content-md5': md5('something else') })).to.deep.equal({ status: 400, code: 'BadDigest' });
      expect((await env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules, 'unchanged').to.deep.equal(rules);
      // With a good Content-MD5 the same document is taken.
      const ok = await fetch(target, { method: 'PUT', headers: { ...(await rootBearer()), 'content-md5': md5(doc) }, body: doc });
      expect(ok.status).to.equal(200);
      expect((await env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules?.map((r) => r.ID)).to.deep.equal(['x']);
      await env.s3.send(new DeleteBucketLifecycleCommand({ Bucket: bucket }));
    });

    it("another tenant can neither read nor change a bucket's configuration", async () => {
      const res = await fetch(`${env.p.endpoint}/admin/users`, {
        method: 'POST',
        headers: { ...(await rootBearer()), 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'lifecycle-mallory', password: 'mallory-password-1' }),
      });
      expect(res.status).to.equal(201);
      const creds = ((await res.json()) as { data: { accessKey: string; secretKey: string } }).data;
      const mallory = sdkClient(env.p.endpoint, creds.accessKey, creds.secretKey);
      try {
        await env.s3.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: rules } }));
        expect((await s3Failure(mallory.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket })))).status).to.equal(403);
        expect(
          (await s3Failure(mallory.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: [] } })))).status,
          'refused before the document is read',
        ).to.equal(403);
        expect(
          (await s3Failure(mallory.send(new PutBucketLifecycleConfigurationCommand({ Bucket: bucket, LifecycleConfiguration: { Rules: [rules[0]!] } }))))
            .status,
        ).to.equal(403);
        expect((await s3Failure(mallory.send(new DeleteBucketLifecycleCommand({ Bucket: bucket })))).status).to.equal(403);
        expect((await env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules).to.deep.equal(rules);
      } finally {
        mallory.destroy();
        await env.s3.send(new DeleteBucketLifecycleCommand({ Bucket: bucket }));
      }
    });

    it("answers x-amz-expiration (the SDK's Expiration) on PUT, GET, HEAD, copy and complete for objects a rule will expire", async () => {
      const b = await newBucket(env.s3, 'life-exp');
      await env.s3.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket: b,
          LifecycleConfiguration: { Rules: [rules[0]!, { ID: 'quick "tmp"', Filter: { Prefix: 'logs/tmp/' }, Status: 'Enabled', Expiration: { Days: 1 } }] },
        }),
      );
      const expected = (lastModified: Date, days: number, id: string) => `expiry-date="${expiryAfterDays(lastModified, days).toUTCString()}", rule-id="${id}"`;
      const put = await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'logs/a.log', Body: 'a log line' }));
      const head = await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'logs/a.log' }));
      expect(head.Expiration).to.equal(expected(head.LastModified!, 2, 'old-logs'));
      expect(put.Expiration).to.equal(head.Expiration);
      expect((await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'logs/a.log', Range: 'bytes=0-2' }))).Expiration).to.equal(head.Expiration);
      // The earliest rule that selects the object (the quoted rule id escaped as S3 does).
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'logs/tmp/b.log', Body: 'b' }));
      const tmp = await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'logs/tmp/b.log' }));
      expect(tmp.Expiration).to.equal(expected(tmp.LastModified!, 1, 'quick \\"tmp\\"'));
      const copy = await env.s3.send(new CopyObjectCommand({ Bucket: b, Key: 'logs/copy.log', CopySource: `${b}/logs/a.log` }));
      expect(copy.Expiration).to.equal(expected(copy.CopyObjectResult!.LastModified!, 2, 'old-logs'));
      const upload = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'logs/parts.log' }));
      const part = await env.s3.send(new UploadPartCommand({ Bucket: b, Key: 'logs/parts.log', UploadId: upload.UploadId, PartNumber: 1, Body: 'one part' }));
      const done = await env.s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: b,
          Key: 'logs/parts.log',
          UploadId: upload.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      );
      expect(done.Expiration).to.match(/^expiry-date=".+ 00:00:00 GMT", rule-id="old-logs"$/);
      // An upload that an AbortIncompleteMultipartUpload rule covers says when it will be aborted.
      await env.s3.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket: b,
          LifecycleConfiguration: {
            Rules: [rules[0]!, { ID: 'uploads-é', Filter: { Prefix: 'logs/' }, Status: 'Enabled', AbortIncompleteMultipartUpload: { DaysAfterInitiation: 3 } }],
          },
        }),
      );
      const started = new Date();
      const pending = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'logs/pending.log' }));
      // (Started and answered on either side of a midnight: either day.)
      expect(pending.AbortDate?.getTime()).to.be.oneOf([expiryAfterDays(started, 3).getTime(), expiryAfterDays(new Date(), 3).getTime()]);
      expect(pending.AbortRuleId).to.equal('uploads-%C3%A9');
      const listed = await env.s3.send(new ListPartsCommand({ Bucket: b, Key: 'logs/pending.log', UploadId: pending.UploadId }));
      expect(listed.AbortDate?.getTime()).to.equal(pending.AbortDate?.getTime());
      expect(listed.AbortRuleId).to.equal('uploads-%C3%A9');
      const elsewhere = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'data/other.bin' }));
      expect(elsewhere.AbortDate).to.equal(undefined);
      // Not selected, or no rules any more: no header.
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'data/c.bin', Body: 'c' }));
      expect((await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'data/c.bin' }))).Expiration).to.equal(undefined);
      await env.s3.send(new DeleteBucketLifecycleCommand({ Bucket: b }));
      expect((await env.s3.send(new HeadObjectCommand({ Bucket: b, Key: 'logs/a.log' }))).Expiration).to.equal(undefined);
    });

    it('the daily job (here the admin purge, run as of a later day) sends expired objects to the recycle bin, restorable', async () => {
      const b = await newBucket(env.s3, 'life-job');
      for (const key of ['logs/1.log', 'logs/2.log', 'data/keep.bin']) await env.s3.send(new PutObjectCommand({ Bucket: b, Key: key, Body: `body of ${key}` }));
      await env.s3.send(new PutBucketLifecycleConfigurationCommand({ Bucket: b, LifecycleConfiguration: { Rules: [rules[0]!] } }));
      const purge = async (now: Date) => adminPurge(env.p.endpoint, await rootBearer(), { now: now.toISOString() });
      expect((await purge(new Date(Date.now() + DAY))).expiredObjects, 'not yet: 2 days').to.equal(0);
      expect((await purge(new Date(Date.now() + 3 * DAY))).expiredObjects).to.equal(2);
      const listed = await env.s3.send(new ListObjectsV2Command({ Bucket: b }));
      expect(listed.Contents?.map((o) => o.Key)).to.deep.equal(['data/keep.bin']);
      expect((await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'logs/1.log' })))).name).to.equal('NoSuchKey');

      const bin = await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${b}`, { headers: await rootBearer() });
      const recycled = ((await bin.json()) as { data: { objects: Array<{ id: number; key: string }> } }).data.objects;
      expect(recycled.map((o) => o.key)).to.deep.equal(['logs/1.log', 'logs/2.log']);
      const restore = await fetch(`${env.p.endpoint}/admin/recycle-bin/${recycled[0]!.id}/restore`, { method: 'POST', headers: await rootBearer() });
      expect(restore.status).to.equal(200);
      const back = await env.s3.send(new GetObjectCommand({ Bucket: b, Key: 'logs/1.log' }));
      expect(await back.Body?.transformToString()).to.equal('body of logs/1.log');
    });

    it('aws s3api put-/get-/delete-bucket-lifecycle-configuration (Debian AWS CLI v2)', async () => {
      const home = await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-life-'));
      try {
        const aws = awsCli(env.p.endpoint, home);
        const config = { Rules: [{ ID: 'cli', Filter: { Prefix: 'cli/' }, Status: 'Enabled', Expiration: { Days: 5 } }] };
        const put = await aws('s3api', 'put-bucket-lifecycle-configuration', '--bucket', bucket, '--lifecycle-configuration', JSON.stringify(config));
        expect(put.code, put.stderr).to.equal(0);
        const got = await aws('s3api', 'get-bucket-lifecycle-configuration', '--bucket', bucket);
        expect(got.code, got.stderr).to.equal(0);
        expect((JSON.parse(got.stdout) as { Rules: unknown }).Rules).to.deep.equal(config.Rules);
        const del = await aws('s3api', 'delete-bucket-lifecycle', '--bucket', bucket);
        expect(del.code, del.stderr).to.equal(0);
        const gone = await aws('s3api', 'get-bucket-lifecycle-configuration', '--bucket', bucket);
        expect(gone.code).to.not.equal(0);
        expect(gone.stderr).to.contain('NoSuchLifecycleConfiguration');
      } finally {
        await rm(home, { recursive: true, force: true });
      }
    });

    it('s3cmd: expire, getlifecycle, setcors, info, dellifecycle, delcors', async () => {
      const home = await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-s3cmd-life-'));
      try {
        const cmd = await s3cmd(env.p.endpoint, home);
        const ok = async (...args: string[]) => {
          const r = await cmd(...args);
          expect(r.code, `s3cmd ${args.join(' ')}\n${r.stdout}${r.stderr}`).to.equal(0);
          return r.stdout;
        };
        const b = bucketName('life-s3cmd');
        await ok('mb', `s3://${b}`);
        await ok('expire', `s3://${b}`, '--expiry-days=30', '--expiry-prefix=logs/');
        expect(await ok('getlifecycle', `s3://${b}`)).to.match(/<Prefix>logs\/<\/Prefix>[\s\S]*<Days>30<\/Days>/);
        const cors = path.join(home, 'cors.xml');
        await writeFile(
          cors,
          '<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>',
        );
        await ok('setcors', cors, `s3://${b}`);
        const info = await ok('info', `s3://${b}`);
        expect(info).to.contain("objects with key prefix 'logs/' will expire in '30' day(s) after creation");
        expect(info).to.contain('<AllowedOrigin>https://app.example</AllowedOrigin>');
        await ok('dellifecycle', `s3://${b}`);
        await ok('delcors', `s3://${b}`);
        const after = await ok('info', `s3://${b}`);
        expect(after).to.match(/Expiration Rule: none/);
        expect(after).to.match(/CORS:\s+none/);
      } finally {
        await rm(home, { recursive: true, force: true });
      }
    });
  },
);
