import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { loadGatewayEnv } from '../../images/gateway/src/config.js';
import { ConfigError } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { startTestPlatform } from './support/platform.js';
import { bodyBytes, bucketName, createTenant, describeWithBucket, login, s3Failure, sdkClient } from './support/s3.js';

/**
 * The gateway answers repeated GETs of small objects itself (images/gateway/src/clients/object-answer-cache.ts).
 * What matters is that it never answers with a version a completed write replaced, whichever service
 * made the write, and never to a caller who may not read the bucket.
 */
describeWithBucket('e2e: small GETs answered by the gateway stay read-after-write consistent', 'answers', (env, bucket) => {
  /** Objects answered by the gateway itself so far (its cache hit counter). */
  const hits = async (): Promise<number> => {
    const text = await (await fetch(`${env.p.endpoint}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('strata_cache_hits_total') && l.includes('cache="gateway-objects"'));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  const get = async (key: string) => bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
  const put = (key: string, body: Buffer, extra: Record<string, unknown> = {}) =>
    env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ...extra }));

  it('answers a repeated GET and HEAD from the gateway with the same bytes and headers', async () => {
    const body = randomBytes(4096);
    await put('a.bin', body, { ContentType: 'application/x-strata', Metadata: { colour: 'blue' } });
    const first = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a.bin' }));
    const firstBytes = await bodyBytes(first);
    const before = await hits();
    const second = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a.bin', ResponseContentDisposition: 'attachment' }));
    expect(await hits()).to.equal(before + 1);
    expect(await bodyBytes(second)).to.deep.equal(body);
    expect(firstBytes).to.deep.equal(body);
    for (const field of ['ETag', 'ContentType', 'ContentLength', 'Metadata'] as const) expect(second[field]).to.deep.equal(first[field]);
    expect(second.LastModified?.getTime()).to.equal(first.LastModified?.getTime());
    expect(second.ContentDisposition).to.equal('attachment');
    const head = await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'a.bin' }));
    expect(await hits()).to.equal(before + 2);
    expect(head.ContentLength).to.equal(4096);
    expect(head.ETag).to.equal(first.ETag);
    expect(head.Metadata).to.deep.equal({ colour: 'blue' });
  });

  it('conditional GETs of an answered object: 304 on a matching If-None-Match, 412 on a failing If-Match; ranges read the data plane', async () => {
    const body = randomBytes(2000);
    const { ETag } = await put('c.bin', body);
    await get('c.bin');
    await get('c.bin');
    const notModified = await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin', IfNoneMatch: ETag })));
    expect(notModified.status).to.equal(304);
    const failed = await s3Failure(env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin', IfMatch: '"0123456789abcdef0123456789abcdef"' })));
    expect(failed).to.deep.equal({ name: 'PreconditionFailed', status: 412 });
    const before = await hits();
    const range = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'c.bin', Range: 'bytes=10-19' }));
    expect(await bodyBytes(range)).to.deep.equal(body.subarray(10, 20));
    expect(range.ContentRange).to.equal('bytes 10-19/2000');
    expect(await hits()).to.equal(before);
  });

  it('never answers a replaced version: overwrite, copy onto the key, multipart complete', async () => {
    const v1 = randomBytes(3000);
    await put('w.bin', v1);
    expect(await get('w.bin')).to.deep.equal(v1);
    expect(await get('w.bin')).to.deep.equal(v1);
    const v2 = randomBytes(3000);
    await put('w.bin', v2);
    expect(await get('w.bin')).to.deep.equal(v2);
    expect(await get('w.bin')).to.deep.equal(v2);

    const source = randomBytes(1500);
    await put('source.bin', source);
    await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'w.bin', CopySource: `${bucket}/source.bin` }));
    expect(await get('w.bin')).to.deep.equal(source);

    const part = randomBytes(5000);
    const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'w.bin' }));
    const { ETag } = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'w.bin', UploadId, PartNumber: 1, Body: part }));
    await env.s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'w.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } }));
    expect(await get('w.bin')).to.deep.equal(part);
    expect(await get('w.bin')).to.deep.equal(part);
  });

  it('never answers a deleted object (DELETE, DeleteObjects), and answers a restored one again', async () => {
    const body = randomBytes(1024);
    await put('d1.bin', body);
    await put('d2.bin', body);
    await get('d1.bin');
    await get('d1.bin');
    await get('d2.bin');
    await get('d2.bin');
    await env.s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'd1.bin' }));
    expect(await s3Failure(get('d1.bin'))).to.deep.equal({ name: 'NoSuchKey', status: 404 });
    expect((await s3Failure(env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'd1.bin' })))).status).to.equal(404);
    await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: 'd2.bin' }] } }));
    expect(await s3Failure(get('d2.bin'))).to.deep.equal({ name: 'NoSuchKey', status: 404 });

    const token = await login(env.p.endpoint);
    const bin = (await (await fetch(`${env.p.endpoint}/admin/recycle-bin?bucket=${bucket}`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      data: { objects: Array<{ id: string; key: string }> };
    };
    const recycled = bin.data.objects.find((o) => o.key === 'd1.bin')!;
    const restored = await fetch(`${env.p.endpoint}/admin/recycle-bin/${recycled.id}/restore`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(restored.status).to.equal(200);
    expect(await get('d1.bin')).to.deep.equal(body);
  });

  it('never answers another tenant, even for an object the gateway holds an answer for', async () => {
    await put('private.bin', Buffer.from('secret bytes'));
    await get('private.bin');
    await get('private.bin');
    const oscar = (await createTenant(env.p.endpoint, 'oscar', 'oscar-password')).s3;
    try {
      expect(await s3Failure(oscar.send(new GetObjectCommand({ Bucket: bucket, Key: 'private.bin' })))).to.deep.equal({ name: 'AccessDenied', status: 403 });
      expect((await s3Failure(oscar.send(new HeadObjectCommand({ Bucket: bucket, Key: 'private.bin' })))).status).to.equal(403);
    } finally {
      oscar.destroy();
    }
  });

  it('keeps no answer for objects above 64 KiB (they stream through)', async () => {
    const big = randomBytes(200 * 1024);
    await put('big.bin', big);
    const before = await hits();
    expect(await get('big.bin')).to.deep.equal(big);
    expect(await get('big.bin')).to.deep.equal(big);
    expect(await hits()).to.equal(before);
  });
});

describe('e2e: the gateway answer cache size (STRATA_GATEWAY_ANSWER_CACHE_BYTES)', function () {
  this.timeout(120_000);

  it('is read from the environment by the gateway image and the standalone platform, with clear errors', () => {
    const gatewaySecrets = { STRATA_INTERNAL_TOKEN: 'x'.repeat(16), STRATA_JWT_SECRET: 'y'.repeat(32) };
    expect(loadGatewayEnv(gatewaySecrets).STRATA_GATEWAY_ANSWER_CACHE_BYTES).to.equal(undefined);
    expect(loadGatewayEnv({ ...gatewaySecrets, STRATA_GATEWAY_ANSWER_CACHE_BYTES: '1048576' }).STRATA_GATEWAY_ANSWER_CACHE_BYTES).to.equal(1048576);
    expect(loadStandaloneEnv({ STRATA_GATEWAY_ANSWER_CACHE_BYTES: '0' }).STRATA_GATEWAY_ANSWER_CACHE_BYTES).to.equal(0);
    for (const bad of ['-1', 'lots', '1.5']) {
      expect(() => loadGatewayEnv({ ...gatewaySecrets, STRATA_GATEWAY_ANSWER_CACHE_BYTES: bad }), bad).to.throw(
        ConfigError,
        /STRATA_GATEWAY_ANSWER_CACHE_BYTES/,
      );
      expect(() => loadStandaloneEnv({ STRATA_GATEWAY_ANSWER_CACHE_BYTES: bad }), bad).to.throw(ConfigError, /STRATA_GATEWAY_ANSWER_CACHE_BYTES/);
    }
  });

  it('0 turns the answers off: every GET reads the data plane and the bytes stay right', async () => {
    const p = await startTestPlatform(undefined, { gatewayAnswerCacheBytes: 0 });
    const s3 = sdkClient(p.endpoint);
    try {
      const bucket = bucketName('noanswers');
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const body = randomBytes(4096);
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'a.bin', Body: body }));
      // Object bytes the data plane has sent to readers (its own /metrics).
      const dataPlaneBytesOut = async () => {
        const text = await (await fetch(`${p.platform.urls['data-plane']}/metrics`)).text();
        return Number(
          text
            .split('\n')
            .find((l) => l.startsWith('strata_data_bytes_out_total'))
            ?.split(' ')
            .pop() ?? 0,
        );
      };
      const before = await dataPlaneBytesOut();
      for (let i = 0; i < 3; i++) expect(await bodyBytes(await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'a.bin' })))).to.deep.equal(body);
      // Every GET read the data plane (with the answers on, the second and third would not have).
      expect((await dataPlaneBytesOut()) - before).to.equal(3 * body.length);
      // And the gateway made no lookups at all, hit or miss, for its answers.
      const metrics = await (await fetch(`${p.endpoint}/metrics`)).text();
      expect(metrics.split('\n').filter((l) => /^strata_cache_(hits|misses)_total\{.*cache="gateway-objects"/.test(l))).to.deep.equal([]);
    } finally {
      s3.destroy();
      await p.destroy();
    }
  });
});
