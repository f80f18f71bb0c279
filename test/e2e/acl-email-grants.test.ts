import { CreateBucketCommand, GetObjectAclCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { awsCli } from './support/cli.js';
import { bucketName, createTenant, describeWithBucket, login, s3Failure, sdkClient } from './support/s3.js';

/**
 * Users' e-mail addresses through the admin API, and S3's grants by e-mail address through the whole platform
 * (gateway → control plane): the aws CLI's `--grant-read emailAddress=...` names a Strata user.
 */
describeWithBucket('e2e: users’ e-mail addresses and grants by e-mail address', 'acl-mail', (env) => {
  let token: string;
  const admin = async (method: string, target: string, body: unknown, bearer = token) => {
    const r = await fetch(`${env.p.endpoint}/admin${target}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as { data?: Record<string, unknown>; error?: { code: string } } };
  };
  before(async () => {
    token = await login(env.p.endpoint);
  });

  it('POST /admin/users takes an optional e-mail address and shows it; PATCH /admin/users/:name sets or removes one; a taken one (any case) is 409', async () => {
    const made = await admin('POST', '/users', { username: 'mail-dora', password: 'mail-dora-password', email: 'Dora@Example.com' });
    expect(made.status).to.equal(201);
    expect(made.body.data).to.include({ username: 'mail-dora', email: 'Dora@Example.com' });
    expect(made.body.data).to.have.property('secretKey');
    expect((await admin('POST', '/users', { username: 'mail-eve', password: 'mail-eve-password', email: 'dora@example.COM' })).status).to.equal(409);
    expect((await admin('POST', '/users', { username: 'mail-eve', password: 'mail-eve-password', email: 'not-an-address' })).status).to.equal(400);
    expect((await admin('POST', '/users', { username: 'mail-eve', password: 'mail-eve-password' })).status).to.equal(201);
    expect(await admin('PATCH', '/users/mail-eve', { email: 'eve@example.com' })).to.deep.equal({
      status: 200,
      body: { data: { username: 'mail-eve', email: 'eve@example.com' } },
    });
    expect((await admin('PATCH', '/users/mail-eve', { email: 'DORA@example.com' })).status).to.equal(409);
    expect((await admin('PATCH', '/users/mail-eve', { email: 42 })).status).to.equal(400);
    expect((await admin('PATCH', '/users/nobody-here', { email: 'x@example.com' })).status).to.equal(400);
    expect(await admin('PATCH', '/users/mail-eve', { email: null })).to.deep.equal({ status: 200, body: { data: { username: 'mail-eve' } } });
    // Only the root manages users.
    const eveToken = await login(env.p.endpoint, 'mail-eve', 'mail-eve-password');
    expect((await admin('PATCH', '/users/mail-eve', { email: 'eve@example.com' }, eveToken)).status).to.equal(403);
  });

  it('`aws s3api put-object-acl --grant-read emailAddress=...` grants the user with that address; get-object-acl names the user; an unknown address is refused', async () => {
    const bob = await createTenant(env.p.endpoint, 'mail-bob');
    const home = await mkdtemp(path.join(os.tmpdir(), 'strata-acl-mail-'));
    try {
      expect((await admin('PATCH', '/users/mail-bob', { email: 'bob@mail.example' })).status).to.equal(200);
      const b = bucketName('acl-mail');
      await env.s3.send(new CreateBucketCommand({ Bucket: b, ObjectOwnership: 'ObjectWriter' }));
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'note.txt', Body: 'for bob' }));
      expect((await s3Failure(bob.s3.send(new GetObjectCommand({ Bucket: b, Key: 'note.txt' })))).status).to.equal(403);

      const aws = awsCli(env.p.endpoint, home);
      const unknown = await aws('s3api', 'put-object-acl', '--bucket', b, '--key', 'note.txt', '--grant-read', 'emailAddress=nobody@mail.example');
      expect(unknown.code).not.to.equal(0);
      expect(unknown.stderr).to.contain('UnresolvableGrantByEmailAddress');
      const granted = await aws('s3api', 'put-object-acl', '--bucket', b, '--key', 'note.txt', '--grant-read', 'emailAddress=Bob@Mail.Example');
      expect(granted.code, granted.stderr).to.equal(0);
      const shown = await aws('s3api', 'get-object-acl', '--bucket', b, '--key', 'note.txt');
      expect(shown.code, shown.stderr).to.equal(0);
      const grants = (JSON.parse(shown.stdout) as { Grants: Array<{ Grantee: { Type: string; ID?: string }; Permission: string }> }).Grants;
      expect(grants.map((g) => [g.Grantee.Type, g.Grantee.ID, g.Permission])).to.deep.equal([['CanonicalUser', 'mail-bob', 'READ']]);
      expect(await (await bob.s3.send(new GetObjectCommand({ Bucket: b, Key: 'note.txt' }))).Body!.transformToString()).to.equal('for bob');

      // The SDK's AccessControlPolicy with an AmazonCustomerByEmail grantee, by a PutObject header too.
      await env.s3.send(new PutObjectCommand({ Bucket: b, Key: 'two.txt', Body: '2', GrantFullControl: 'emailAddress="bob@mail.example"' }));
      const acl = await env.s3.send(new GetObjectAclCommand({ Bucket: b, Key: 'two.txt' }));
      expect(acl.Grants?.map((g) => g.Grantee?.ID)).to.deep.equal(['mail-bob']);
      const other = sdkClient(env.p.endpoint, bob.accessKey, bob.secretKey);
      try {
        expect(await (await other.send(new GetObjectCommand({ Bucket: b, Key: 'two.txt' }))).Body!.transformToString()).to.equal('2');
      } finally {
        other.destroy();
      }
    } finally {
      bob.s3.destroy();
      await rm(home, { recursive: true, force: true });
    }
  });
});
