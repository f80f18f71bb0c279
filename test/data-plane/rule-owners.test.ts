import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { expect } from 'chai';
import { OWNER_ANSWERS, type ErrorAnswer } from '../support/rule-owners.js';
import { startObjectLayer, TOKEN, type ObjectLayer } from './harness.js';

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

/** An internal API's JSON error as its answer (status, code, message, extra fields). */
async function answerOf(res: Response): Promise<ErrorAnswer> {
  const { error } = (await res.json()) as { error: { code: string; message: string; extra?: Record<string, string> } };
  return { status: res.status, code: error.code, message: error.message, extra: error.extra ?? {} };
}

/**
 * The object layer's internal APIs, given the values the gateway refuses, answer what the rule's one
 * owner in the object model answers (test/gateway/rule-owners.test.ts: the same answers through the
 * gateway). Before each rule had one owner, the data plane answered these differently (BadDigest for a
 * malformed instant-upload MD5, InvalidPartNumber for part 10001, InvalidPartOrder for part 0, a page
 * for max-parts=abc) or with other messages.
 */
describe('object layer: each S3 rule is answered by its one owner (PostgreSQL)', function () {
  this.timeout(90_000);
  let layer: ObjectLayer;
  let bucket: string;
  let uploadId: string;
  const json = { 'content-type': 'application/json' };

  before(async () => {
    layer = await startObjectLayer('postgres');
    bucket = `owners-${randomBytes(4).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
    expect((await layer.dpFetch('PUT', `/internal/objects/${bucket}/source`, '0123456789', { 'x-strata-owner': 'alice' })).status).to.equal(200);
    const created = await layer.dpFetch('POST', `/internal/multipart/${bucket}/k`, JSON.stringify({ owner: 'alice' }), json);
    uploadId = ((await created.json()) as { uploadId: string }).uploadId;
  });
  after(async () => {
    await layer?.stop();
  });

  const uploadPath = (rest = '') => `/internal/multipart/${bucket}/k/${uploadId}${rest}`;
  const complete = (numbers: number[]) =>
    layer.dpFetch('POST', uploadPath('/complete'), JSON.stringify({ parts: numbers.map((n) => ({ partNumber: n, etag: md5(String(n)) })) }), json);

  /** A PUT declaring 6 GiB, of which a few bytes are sent: the answer comes before the rest would. */
  const hugePut = (path: string) =>
    new Promise<ErrorAnswer>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: layer.dp.port, path, method: 'PUT', headers: { 'x-strata-internal-token': TOKEN, 'content-length': String(6 * 1024 ** 3) } },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c));
          res.on('end', () => {
            const { error } = JSON.parse(body) as { error: { code: string; message: string; extra?: Record<string, string> } };
            resolve({ status: res.statusCode ?? 0, code: error.code, message: error.message, extra: error.extra ?? {} });
          });
        },
      );
      req.on('error', reject);
      req.write(randomBytes(1024));
    });

  it('a body declared past 5 GiB: PutObject and UploadPart answer as checkObjectSize', async () => {
    expect(await hugePut(`/internal/objects/${bucket}/huge`)).to.deep.equal(OWNER_ANSWERS.tooLarge());
    expect(await hugePut(uploadPath('/parts/1'))).to.deep.equal(OWNER_ANSWERS.tooLarge());
  });

  it('a part number past 10000: UploadPart and GetObject answer as checkPartNumber', async () => {
    expect(await answerOf(await layer.dpFetch('PUT', uploadPath('/parts/10001'), 'x'))).to.deep.equal(OWNER_ANSWERS.partNumberTooHigh());
    expect(await answerOf(await layer.dpFetch('GET', `/internal/objects/${bucket}/source?partNumber=10001`))).to.deep.equal(OWNER_ANSWERS.partNumberTooHigh());
  });

  it("CompleteMultipartUpload's parts (none, part 0, out of order) answer as checkPartOrder", async () => {
    expect(await answerOf(await complete([]))).to.deep.equal(OWNER_ANSWERS.noParts(uploadId));
    expect(await answerOf(await complete([0]))).to.deep.equal(OWNER_ANSWERS.partZero(uploadId));
    expect(await answerOf(await complete([2, 1]))).to.deep.equal(OWNER_ANSWERS.outOfOrder(uploadId));
  });

  it('a write with If-Match onto a key without an object answers as checkWriteConditions', async () => {
    const put = await layer.dpFetch('PUT', `/internal/objects/${bucket}/missing`, 'x', { 'x-strata-owner': 'alice', 'if-match': '"0123"' });
    expect(await answerOf(put)).to.deep.equal(OWNER_ANSWERS.ifMatchMissing('missing'));
  });

  it('an instant-upload MD5 that is not 32 hex digits is InvalidDigest, as at the gateway, and stores nothing', async () => {
    const instant = await layer.dpFetch('PUT', `/internal/objects/${bucket}/instant`, 'x', { 'x-strata-owner': 'alice', 'x-strata-instant-md5': 'xyz' });
    expect(await answerOf(instant)).to.deep.equal(OWNER_ANSWERS.instantMd5Form());
    expect((await layer.dpFetch('HEAD', `/internal/objects/${bucket}/instant`)).status, 'nothing stored').to.equal(404);
  });

  it('a copy-source range and page sizes of no valid form answer as their readers', async () => {
    const copy = await layer.dpFetch(
      'PUT',
      uploadPath('/parts/1/copy'),
      JSON.stringify({ sourceBucket: bucket, sourceKey: 'source', range: 'bytes=nonsense' }),
      json,
    );
    expect(await answerOf(copy)).to.deep.equal(OWNER_ANSWERS.copyRangeForm());
    expect(await answerOf(await layer.dpFetch('GET', uploadPath('/parts?maxParts=abc')))).to.deep.equal(OWNER_ANSWERS.maxPartsForm());
    expect(await answerOf(await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?maxKeys=abc`))).to.deep.equal(OWNER_ANSWERS.maxKeysForm());
  });

  it('a Complete names its parts by ETag in any of its forms (quoted, weak, space around), as the gateway reads them', async () => {
    const created = await layer.dpFetch('POST', `/internal/multipart/${bucket}/forms`, JSON.stringify({ owner: 'alice' }), json);
    const id = ((await created.json()) as { uploadId: string }).uploadId;
    const part = await layer.dpFetch('PUT', `/internal/multipart/${bucket}/forms/${id}/parts/1`, 'bytes');
    expect(part.status).to.equal(200);
    const done = await layer.dpFetch(
      'POST',
      `/internal/multipart/${bucket}/forms/${id}/complete`,
      JSON.stringify({ parts: [{ partNumber: 1, etag: ` W/"${md5('bytes')}" ` }] }),
      json,
    );
    expect(done.status, await done.clone().text()).to.equal(200);
  });
});
