import { CreateBucketCommand, HeadBucketCommand, ListBucketsCommand, S3ServiceException } from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { platformHooks, ROOT_USER } from './support/platform.js';
import { bucketName, s3ErrorOf, sdkClient } from './support/s3.js';

describe('e2e: gateway flow control from a rules file', function () {
  this.timeout(60_000);
  const p = platformHooks({
    gatewayRules: 'rateLimits:\n  routes:\n    ListBuckets: { points: 2, duration: 60 }\n    Preflight: { points: 2, duration: 60 }\n',
  });

  it('a rate-limited S3 operation answers SlowDown (503, S3 XML, Retry-After) while others go on', async () => {
    const s3 = sdkClient(p.endpoint);
    const bucket = bucketName('flow');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new ListBucketsCommand({}));
    await s3.send(new ListBucketsCommand({}));
    let refused: S3ServiceException | undefined;
    try {
      await s3.send(new ListBucketsCommand({}));
    } catch (err) {
      refused = err as S3ServiceException;
    }
    expect(refused?.name).to.equal('SlowDown');
    expect(refused?.$metadata.httpStatusCode).to.equal(503);
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
    s3.destroy();
  });

  it('browser preflights (OPTIONS with an Origin) are rate-limited as the Preflight route, before any bucket lookup', async () => {
    const preflight = (target: string) =>
      fetch(`${p.endpoint}${target}`, { method: 'OPTIONS', headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PUT' } });
    expect((await preflight('/some-bucket/a.txt')).status).to.equal(200);
    expect((await preflight('/another-bucket/b.txt')).status).to.equal(200);
    const refused = await preflight('/third-bucket/c.txt');
    expect(refused.status).to.equal(503);
    expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
    expect(s3ErrorOf(await refused.text()).code).to.equal('SlowDown');
    // Requests that are not preflights are not counted against it.
    const s3 = sdkClient(p.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: bucketName('flow-pre') }));
    s3.destroy();
  });
});

describe("e2e: a user's rate limit counts browser form uploads too", function () {
  this.timeout(60_000);
  const INTERNAL_TOKEN = 'e2e-flow-internal-token-0123456789';
  // Three requests a minute for the root user, whatever the route.
  const p = platformHooks({
    gatewayRules: `rateLimits:\n  users:\n    classes:\n      forms: { points: 3, duration: 60, users: [${ROOT_USER}] }\n`,
    internalToken: INTERNAL_TOKEN,
  });

  /** Whether the data plane holds the object (asked behind the gateway: the user's own requests are used up). */
  const stored = async (bucket: string, key: string) =>
    (
      await fetch(`${p.platform.urls['data-plane']}/internal/objects/${bucket}/${encodeURIComponent(key)}`, {
        method: 'HEAD',
        headers: { 'x-strata-internal-token': INTERNAL_TOKEN },
      })
    ).status;

  it('the upload past the limit answers SlowDown with Retry-After and stores nothing', async () => {
    const s3 = sdkClient(p.endpoint);
    const bucket = bucketName('forms');
    await s3.send(new CreateBucketCommand({ Bucket: bucket })); // 1
    const submit = async (key: string) => {
      // Signed locally: no request to the gateway.
      const post = await createPresignedPost(s3, { Bucket: bucket, Key: key, Expires: 300 });
      const form = new FormData();
      for (const [name, value] of Object.entries(post.fields)) form.append(name, value);
      form.append('file', new Blob([key]), 'f.txt');
      return fetch(post.url, { method: 'POST', body: form });
    };
    expect((await submit('a.txt')).status).to.equal(204); // 2
    expect((await submit('b.txt')).status).to.equal(204); // 3
    const refused = await submit('c.txt');
    expect(refused.status).to.equal(503);
    expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(s3ErrorOf(await refused.text()).code).to.equal('SlowDown');
    expect([await stored(bucket, 'a.txt'), await stored(bucket, 'b.txt'), await stored(bucket, 'c.txt')]).to.deep.equal([200, 200, 404]);
    s3.destroy();
  });
});
