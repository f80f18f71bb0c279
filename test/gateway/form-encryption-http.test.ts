import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { startGateway } from '../../images/gateway/src/app.js';
import { BuiltInKeyStore, keyFingerprint } from '../../images/data-plane/src/encryption/key-store.js';
import { createLogger, type RunningService } from '../../images/service-kit/src/index.js';
import { ROOT, startObjectLayer, TOKEN, type ObjectLayer } from '../data-plane/harness.js';
import { codeOf } from './handler-app.js';

const BUCKET = 'form-sse';

/** What a failed SDK call answered: status, code, and the error document's Header element. */
async function failure(p: Promise<unknown>): Promise<{ status?: number; code: string; message?: string; header?: string }> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof S3ServiceException)) throw err;
    const header = (err as S3ServiceException & { Header?: string }).Header;
    return { status: err.$metadata.httpStatusCode, code: err.name, message: err.message, ...(header ? { header } : {}) };
  }
  throw new Error('the call succeeded');
}

/**
 * Server-side encryption asked for by a browser form's fields (S3's POST Object takes the PUT headers'
 * names as fields), through a real gateway, control plane and data plane with SSE-S3 and KMS keys; and
 * dual-layer encryption (aws:kms:dsse), which Strata refuses with S3's NotImplemented.
 */
describe('gateway: encryption asked by form fields (POST Object) and dual-layer refusals (real control and data planes)', function () {
  this.timeout(120_000);
  let layer: ObjectLayer;
  let gateway: RunningService;
  let s3: S3Client;
  const customerKey = randomBytes(32);
  const sseC = {
    'x-amz-server-side-encryption-customer-algorithm': 'AES256',
    'x-amz-server-side-encryption-customer-key': customerKey.toString('base64'),
    'x-amz-server-side-encryption-customer-key-MD5': createHash('md5').update(customerKey).digest('base64'),
  };

  before(async () => {
    const kek = randomBytes(32);
    layer = await startObjectLayer('pglite', {
      inlineBlobBytes: 0,
      keyStores: {
        master: new BuiltInKeyStore(new Map([[keyFingerprint(kek), kek]]), keyFingerprint(kek), 'sse-s3'),
        kms: new BuiltInKeyStore(new Map([['app-key', randomBytes(32)]]), 'app-key', 'sse-kms'),
      },
    });
    gateway = await startGateway({
      port: 0,
      host: '127.0.0.1',
      controlPlaneUrl: layer.cp.url,
      dataPlaneUrl: layer.dp.url,
      internalToken: TOKEN,
      jwtSecret: 'test-jwt-secret-0123456789',
      rootUser: ROOT.user,
      logger: createLogger('test', 'silent'),
    });
    s3 = new S3Client({
      endpoint: gateway.url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: ROOT.user, secretAccessKey: ROOT.password },
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  });
  after(async () => {
    s3?.destroy();
    await gateway?.stop(1000);
    await layer?.stop();
  });

  /** A form signed for `key` with `fields` (each covered by the policy), posted with `body` as its file. */
  async function post(key: string, fields: Record<string, string>, body: string): Promise<Response> {
    const signed = await createPresignedPost(s3, { Bucket: BUCKET, Key: key, Expires: 300, Fields: fields });
    const form = new FormData();
    for (const [name, value] of Object.entries(signed.fields)) form.append(name, value);
    form.append('file', new Blob([body]), 'f.txt');
    return fetch(signed.url, { method: 'POST', body: form });
  }

  it('SSE-S3 (x-amz-server-side-encryption: AES256): stored encrypted, answered with the header, read back as S3 reads it', async () => {
    const r = await post('forms/s3.txt', { 'x-amz-server-side-encryption': 'AES256' }, 'sse-s3 form body');
    expect(r.status, await r.clone().text()).to.equal(204);
    expect(r.headers.get('x-amz-server-side-encryption')).to.equal('AES256');
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'forms/s3.txt' }));
    expect([got.ServerSideEncryption, await got.Body!.transformToString()]).to.deep.equal(['AES256', 'sse-s3 form body']);
    const blobs = (await layer.files()).filter((f) => f.startsWith('blobs/'));
    expect(blobs.length).to.be.greaterThan(0);
    for (const f of blobs) expect((await readFile(path.join(layer.dataDir, f))).includes('sse-s3 form body'), 'plaintext on disk').to.equal(false);
  });

  it('SSE-KMS with a key id field: the object names its KMS key; an unknown key id stores nothing', async () => {
    const r = await post('forms/kms.txt', { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'app-key' }, 'kms body');
    expect(r.status, await r.clone().text()).to.equal(204);
    expect([r.headers.get('x-amz-server-side-encryption'), r.headers.get('x-amz-server-side-encryption-aws-kms-key-id')]).to.deep.equal(['aws:kms', 'app-key']);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'forms/kms.txt' }));
    expect([head.ServerSideEncryption, head.SSEKMSKeyId]).to.deep.equal(['aws:kms', 'app-key']);
    const unknown = await post(
      'forms/kms-unknown.txt',
      { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'nope' },
      'x',
    );
    expect(unknown.status).to.be.within(400, 499);
    expect((await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'forms/kms-unknown.txt' })))).status).to.equal(404);
  });

  it('SSE-C fields: the object needs its key to be read (400 without it); a malformed key MD5 is 400 InvalidArgument and stores nothing', async () => {
    const r = await post('forms/c.txt', sseC, 'customer-keyed body');
    expect(r.status, await r.clone().text()).to.equal(204);
    expect(r.headers.get('x-amz-server-side-encryption-customer-key-md5')).to.equal(sseC['x-amz-server-side-encryption-customer-key-MD5']);
    expect((await failure(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'forms/c.txt' })))).status).to.equal(400);
    const got = await s3.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: 'forms/c.txt', SSECustomerAlgorithm: 'AES256', SSECustomerKey: customerKey.toString('base64') }),
    );
    expect(await got.Body!.transformToString()).to.equal('customer-keyed body');
    const bad = await post(
      'forms/c-bad.txt',
      { ...sseC, 'x-amz-server-side-encryption-customer-key-MD5': createHash('md5').update('x').digest('base64') },
      'x',
    );
    expect([bad.status, codeOf(await bad.text())]).to.deep.equal([400, 'InvalidArgument']);
    expect((await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'forms/c-bad.txt' })))).status).to.equal(404);
  });

  it("aws:kms:dsse (dual-layer) is refused with S3's NotImplemented naming the header, on a PUT, a form and a bucket default; nothing is stored", async () => {
    const notImplemented = {
      status: 501,
      code: 'NotImplemented',
      message: 'A header you provided implies functionality that is not implemented.',
      header: 'x-amz-server-side-encryption',
    };
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'dsse.txt', Body: 'x', ServerSideEncryption: 'aws:kms:dsse' })))).to.deep.equal(
      notImplemented,
    );
    const form = await post('forms/dsse.txt', { 'x-amz-server-side-encryption': 'aws:kms:dsse' }, 'x');
    const text = await form.text();
    expect([form.status, codeOf(text), /<Header>([^<]*)<\/Header>/.exec(text)?.[1]]).to.deep.equal([501, 'NotImplemented', 'x-amz-server-side-encryption']);
    const { header: _none, ...bucketDefault } = notImplemented;
    expect(
      await failure(
        s3.send(
          new PutBucketEncryptionCommand({
            Bucket: BUCKET,
            ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms:dsse' } }] },
          }),
        ),
      ),
    ).to.deep.equal(bucketDefault);
    for (const key of ['dsse.txt', 'forms/dsse.txt'])
      expect((await failure(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })))).status).to.equal(404);
  });
});
