import { CreateBucketCommand, DeleteBucketCorsCommand, GetBucketCorsCommand, PutBucketCorsCommand, PutObjectCommand, type CORSRule } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { bucketName, describeWithBucket, login, rootPresign, s3ErrorOf, s3Failure, tenantClient } from './support/s3.js';

describeWithBucket('e2e: bucket CORS configuration (PutBucketCors) and the answers to browsers', 'cors-cfg', (env, bucket) => {
  const app = 'https://app.example';

  const rules: CORSRule[] = [
    {
      ID: 'app',
      AllowedOrigins: [app],
      AllowedMethods: ['GET', 'PUT'],
      AllowedHeaders: ['content-type', 'x-amz-meta-*'],
      ExposeHeaders: ['ETag', 'x-amz-request-id'],
      MaxAgeSeconds: 600,
    },
    { ID: 'anyone-reads', AllowedOrigins: ['*'], AllowedMethods: ['GET', 'HEAD'] },
  ];
  const preflight = (b: string, origin: string, method: string, headers?: string) =>
    fetch(`${env.p.endpoint}/${b}/some/key`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, ...(headers ? { 'access-control-request-headers': headers } : {}) },
    });

  it('the SDK puts, reads back and deletes a configuration; none is NoSuchCORSConfiguration', async () => {
    expect(await s3Failure(env.s3.send(new GetBucketCorsCommand({ Bucket: bucket })))).to.deep.equal({ name: 'NoSuchCORSConfiguration', status: 404 });
    await env.s3.send(new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: rules } }));
    const got = await env.s3.send(new GetBucketCorsCommand({ Bucket: bucket }));
    expect(got.CORSRules).to.deep.equal([rules[0], { ...rules[1] }]);
    await env.s3.send(new DeleteBucketCorsCommand({ Bucket: bucket }));
    expect((await s3Failure(env.s3.send(new GetBucketCorsCommand({ Bucket: bucket })))).name).to.equal('NoSuchCORSConfiguration');
  });

  it("answers preflights and requests by the bucket's rules: allowed origin, method and headers, or 403 AccessForbidden", async () => {
    await env.s3.send(new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: rules } }));
    const ok = await preflight(bucket, app, 'PUT', 'Content-Type, X-Amz-Meta-Colour');
    expect(ok.status).to.equal(200);
    expect(Object.fromEntries([...ok.headers].filter(([h]) => h.startsWith('access-control-')))).to.deep.equal({
      'access-control-allow-origin': app,
      'access-control-allow-methods': 'GET, PUT',
      'access-control-allow-headers': 'content-type, x-amz-meta-colour',
      'access-control-expose-headers': 'ETag, x-amz-request-id',
      'access-control-max-age': '600',
    });
    // The second rule lets any origin read, and only read.
    const read = await preflight(bucket, 'https://other.example', 'GET');
    expect(read.status).to.equal(200);
    expect(read.headers.get('access-control-allow-origin')).to.equal('*');
    for (const [origin, method, headers] of [
      ['https://other.example', 'PUT', undefined],
      [app, 'DELETE', undefined],
      [app, 'PUT', 'authorization'],
    ] as const) {
      const refused = await preflight(bucket, origin, method, headers);
      expect(refused.status, `${origin} ${method} ${headers}`).to.equal(403);
      expect(s3ErrorOf(await refused.text()).code).to.equal('AccessForbidden');
      expect(refused.headers.get('access-control-allow-origin')).to.equal(null);
    }
    // A real request: the allowed origin may read the answer headers; a refused one gets none (the browser hides the answer).
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'page.txt', Body: 'for the page' }));
    const url = rootPresign(env.p.endpoint, 'GET', `/${bucket}/page.txt`);
    const get = await fetch(url, { headers: { origin: app } });
    expect(get.status).to.equal(200);
    expect(get.headers.get('access-control-allow-origin')).to.equal(app);
    expect(get.headers.get('access-control-expose-headers')).to.equal('ETag, x-amz-request-id');
    const putUrl = rootPresign(env.p.endpoint, 'DELETE', `/${bucket}/page.txt`);
    const del = await fetch(putUrl, { method: 'DELETE', headers: { origin: app } });
    expect(del.status, 'the request itself is not refused by CORS').to.equal(204);
    expect(del.headers.get('access-control-allow-origin')).to.equal(null);

    // A bucket without rules keeps the server-wide policy (here the default, any origin).
    const other = bucketName('cors-none');
    await env.s3.send(new CreateBucketCommand({ Bucket: other }));
    const wide = await preflight(other, 'https://other.example', 'DELETE');
    expect(wide.status).to.equal(200);
    expect(wide.headers.get('access-control-allow-origin')).to.equal('*');
    // Deleting the rules brings the server-wide policy back for this bucket too.
    await env.s3.send(new DeleteBucketCorsCommand({ Bucket: bucket }));
    expect((await preflight(bucket, 'https://other.example', 'DELETE')).status).to.equal(200);
  });

  it('refuses bad configurations (and keeps the one in place); another tenant can neither read nor change it', async () => {
    await env.s3.send(new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: rules } }));
    expect(
      await s3Failure(
        env.s3.send(new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['PATCH'] }] } })),
      ),
    ).to.deep.equal({ name: 'InvalidRequest', status: 400 });
    const token = await login(env.p.endpoint);
    const md5 = (s: string) => createHash('md5').update(s).digest('base64');
    const send = async (body: string, headers: Record<string, string>) => {
      const res = await fetch(`${env.p.endpoint}/${bucket}?cors`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, ...headers }, body });
      return { status: res.status, code: s3ErrorOf(await res.text()).code };
    };
    const noOrigin = '<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>';
    expect(await send(noOrigin, { 'content-md5': md5(noOrigin) })).to.deep.equal({ status: 400, code: 'MalformedXML' });
    const good = '<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>';
    expect(await send(good, {})).to.deep.equal({ status: 400, code: 'InvalidRequest' });
    expect(await send(good, { 'content-md5': md5('other') })).to.deep.equal({ status: 400, code: 'BadDigest' });
    expect((await env.s3.send(new GetBucketCorsCommand({ Bucket: bucket }))).CORSRules?.map((r) => r.ID)).to.deep.equal(['app', 'anyone-reads']);

    const mallory = await tenantClient(env.p.endpoint, 'cors-mallory');
    try {
      expect((await s3Failure(mallory.send(new GetBucketCorsCommand({ Bucket: bucket })))).status).to.equal(403);
      expect(
        (
          await s3Failure(
            mallory.send(
              new PutBucketCorsCommand({ Bucket: bucket, CORSConfiguration: { CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['DELETE'] }] } }),
            ),
          )
        ).status,
      ).to.equal(403);
      expect((await s3Failure(mallory.send(new DeleteBucketCorsCommand({ Bucket: bucket })))).status).to.equal(403);
    } finally {
      mallory.destroy();
    }
    expect((await env.s3.send(new GetBucketCorsCommand({ Bucket: bucket }))).CORSRules?.map((r) => r.ID)).to.deep.equal(['app', 'anyone-reads']);
  });
});
