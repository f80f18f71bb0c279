import {
  DeleteBucketPolicyCommand,
  DeleteObjectsCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketAclCommand,
  PutBucketPolicyCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectRetentionCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { rawRequest } from '../support/http.js';
import { bearer, bodyText, describeWithBucket, s3ErrorOf, s3Failure } from './support/s3.js';

/** What Strata does not do is NotImplemented, and a bad key is refused on every operation. */
describeWithBucket('e2e: NotImplemented answers, the private ACL and bad keys', 'details', (env, bucket) => {
  it("NotImplemented for every versioning, policy and lock write; ?acl is the object's ACL (private), never the object", async () => {
    const attempts: Array<[string, () => Promise<unknown>]> = [
      [
        'PutBucketVersioning Suspended',
        () => env.s3.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Suspended' } })),
      ],
      ['PutBucketPolicy', () => env.s3.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: JSON.stringify({ Version: '2012-10-17', Statement: [] }) }))],
      [
        'PutObjectRetention',
        () =>
          env.s3.send(
            new PutObjectRetentionCommand({
              Bucket: bucket,
              Key: 'range.txt',
              Retention: { Mode: 'GOVERNANCE', RetainUntilDate: new Date(Date.now() + 86_400_000) },
            }),
          ),
      ],
      ['PutObjectLegalHold', () => env.s3.send(new PutObjectLegalHoldCommand({ Bucket: bucket, Key: 'range.txt', LegalHold: { Status: 'ON' } }))],
    ];
    for (const [name, attempt] of attempts) expect(await s3Failure(attempt()), name).to.deep.equal({ name: 'NotImplemented', status: 501 });
    // Deleting the policy no bucket has is S3's 204 (terraform destroy, cleanup scripts).
    expect((await env.s3.send(new DeleteBucketPolicyCommand({ Bucket: bucket }))).$metadata.httpStatusCode).to.equal(204);
    // ACLs are implemented (test/e2e/access-control.test.ts); this bucket has them off, as S3's default.
    expect(await s3Failure(env.s3.send(new PutBucketAclCommand({ Bucket: bucket, ACL: 'public-read' })))).to.deep.equal({
      name: 'AccessControlListNotSupported',
      status: 400,
    });
    const versioning = await fetch(`${env.p.endpoint}/${bucket}?versioning`, { headers: bearer(env.token) });
    expect(await versioning.text()).to.match(/<VersioningConfiguration[^>]*\/>|<VersioningConfiguration[^>]*><\/VersioningConfiguration>/);
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'acl.txt', Body: 'SECRET OBJECT BYTES' }));
    const acl = await fetch(`${env.p.endpoint}/${bucket}/acl.txt?acl`, { headers: bearer(env.token), redirect: 'manual' });
    expect(acl.status).to.equal(200);
    const xml = await acl.text();
    expect(xml).to.contain('<AccessControlPolicy').and.contain('<Permission>FULL_CONTROL</Permission>');
    expect(xml).not.to.contain('SECRET OBJECT BYTES');
    expect((await s3Failure(env.s3.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'no-such.txt' })))).name).to.equal('NoSuchKey');
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'acl.txt' })))).to.equal('SECRET OBJECT BYTES');
  });

  it('bad keys on every operation: ".." segments and NUL are InvalidObjectName, DeleteObjects reports them per key', async () => {
    const h = bearer(env.token);
    for (const [method, target] of [
      ['GET', `/${bucket}/a/../b?proxy=true`],
      ['HEAD', `/${bucket}/a/%2E%2E/b`],
      ['DELETE', `/${bucket}/..`],
      ['POST', `/${bucket}/x%00y?uploads`],
    ] as const) {
      const r = await rawRequest(env.p.endpoint, method, target, h);
      expect(r.status, `${method} ${target}`).to.equal(400);
      if (method !== 'HEAD') expect(s3ErrorOf(r.body).code, `${method} ${target}`).to.equal('InvalidObjectName');
    }
    const copy = await rawRequest(env.p.endpoint, 'PUT', `/${bucket}/copy-target`, { ...h, 'x-amz-copy-source': `/${bucket}/a/../range.txt` });
    expect(s3ErrorOf(copy.body).code).to.equal('InvalidObjectName');
    // A DTD (external entity) in a request document is MalformedXML, not a server error.
    const xxe = await rawRequest(
      env.p.endpoint,
      'POST',
      `/${bucket}?delete`,
      h,
      '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><Delete><Object><Key>&x;</Key></Object></Delete>',
    );
    expect([xxe.status, s3ErrorOf(xxe.body).code]).to.deep.equal([400, 'MalformedXML']);
    const quiet = await env.s3.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Quiet: true, Objects: [{ Key: 'fine-to-delete' }, { Key: 'bad/../key' }] } }),
    );
    expect(quiet.Deleted ?? []).to.have.length(0);
    expect(quiet.Errors?.map((e) => [e.Key, e.Code])).to.deep.equal([['bad/../key', 'InvalidObjectName']]);
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy-target' })))).status).to.equal(404);
  });
});
