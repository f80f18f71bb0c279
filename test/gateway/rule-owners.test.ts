import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { OWNER_ANSWERS, type ErrorAnswer } from '../support/rule-owners.js';
import { codeOf, handlerFixture } from './handler-app.js';

/** An S3 error document as its answer: status, Code, Message and the fields `extra` names. */
async function answerOf(res: Response, extra: Record<string, string>): Promise<ErrorAnswer> {
  const xml = await res.text();
  const field = (name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1] ?? '';
  return {
    status: res.status,
    code: field('Code'),
    message: field('Message'),
    extra: Object.fromEntries(Object.keys(extra).map((k) => [k, field(k)])),
  };
}

const completion = (numbers: number[]) =>
  `<CompleteMultipartUpload>${numbers.map((n) => `<Part><PartNumber>${n}</PartNumber><ETag>"${createHash('md5').update(String(n)).digest('hex')}"</ETag></Part>`).join('')}</CompleteMultipartUpload>`;

/**
 * Each S3 rule has one owner in the object model: through the gateway a refused value gets the answer
 * of that owner (the gateway reads the syntax, the object layer — here the fake, which keeps S3's rules
 * by the same functions — judges the rest). test/data-plane/rule-owners.test.ts sends the same values
 * straight to the real object layer and expects the same answers.
 */
describe('gateway: each S3 rule is answered by its one owner', () => {
  const fx = handlerFixture((layer) => {
    layer.addBucket('videos', 'alice');
    layer.store('videos', 'source', Buffer.from('0123456789'));
  });
  const expectOwner = async (res: Promise<Response>, expected: ErrorAnswer) => expect(await answerOf(await res, expected.extra)).to.deep.equal(expected);

  it('a part number past 10000 (UploadPart, GetObject) reaches the object layer, which refuses it', async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    await expectOwner(fx.app.fetch('PUT', '/videos/k?partNumber=10001&uploadId=upload-1', { body: 'x' }), OWNER_ANSWERS.partNumberTooHigh());
    await expectOwner(fx.app.fetch('GET', '/videos/source?partNumber=10001'), OWNER_ANSWERS.partNumberTooHigh());
    expect(fx.layer.callsOf('uploadPart').map((c) => c[3])).to.deep.equal([10001]);
  });

  it("CompleteMultipartUpload's parts (none, part 0, out of order) are judged by the object layer, naming the upload", async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    const complete = (numbers: number[]) => fx.app.fetch('POST', '/videos/k?uploadId=upload-1', { body: completion(numbers) });
    await expectOwner(complete([]), OWNER_ANSWERS.noParts('upload-1'));
    await expectOwner(complete([0]), OWNER_ANSWERS.partZero('upload-1'));
    await expectOwner(complete([2, 1]), OWNER_ANSWERS.outOfOrder('upload-1'));
    expect(fx.layer.callsOf('completeMultipart')).to.have.length(3);
  });

  it('a body declared past 5 GiB (PutObject, UploadPart) is refused by the object layer before its bytes are read', async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    // (An aws-chunked body declares its length apart from the bytes sent.)
    const huge = { 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(6 * 1024 ** 3) };
    await expectOwner(fx.app.fetch('PUT', '/videos/huge', { headers: huge, body: 'x' }), OWNER_ANSWERS.tooLarge());
    await expectOwner(fx.app.fetch('PUT', '/videos/k?partNumber=1&uploadId=upload-1', { headers: huge, body: 'x' }), OWNER_ANSWERS.tooLarge());
    expect([fx.layer.objects.has('videos/huge'), fx.layer.uploads.get('upload-1')?.parts.size]).to.deep.equal([false, 0]);
  });

  it('a copy onto itself is judged by the object layer: asking for encryption is a change, asking for nothing is InvalidRequest', async () => {
    const self = { 'x-amz-copy-source': '/videos/source' };
    const encrypted = await fx.app.fetch('PUT', '/videos/source', { headers: { ...self, 'x-amz-server-side-encryption': 'AES256' } });
    expect(encrypted.status, await encrypted.text()).to.equal(200);
    const unchanged = await fx.app.fetch('PUT', '/videos/source', { headers: self });
    expect([unchanged.status, codeOf(await unchanged.text())]).to.deep.equal([400, 'InvalidRequest']);
    expect(fx.layer.callsOf('copyObject')).to.have.length(2);
  });

  it('a write with If-Match onto a key without an object is NoSuchKey, as the object layer answers it', async () => {
    await expectOwner(fx.app.fetch('PUT', '/videos/missing', { headers: { 'if-match': '"0123"' }, body: 'x' }), OWNER_ANSWERS.ifMatchMissing('missing'));
  });

  it('an instant-upload MD5 that is not 32 hex digits is InvalidDigest before anything is stored', async () => {
    await expectOwner(fx.app.fetch('PUT', '/videos/instant', { headers: { 'x-service-md5': 'xyz' }, body: 'x' }), OWNER_ANSWERS.instantMd5Form());
    expect(fx.layer.callsOf('putObject')).to.deep.equal([]);
  });

  it('a copy-source range and page sizes of no valid form get the same answers as the object layer gives', async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    await expectOwner(
      fx.app.fetch('PUT', '/videos/k?partNumber=1&uploadId=upload-1', {
        headers: { 'x-amz-copy-source': '/videos/source', 'x-amz-copy-source-range': 'bytes=nonsense' },
      }),
      OWNER_ANSWERS.copyRangeForm(),
    );
    await expectOwner(fx.app.fetch('GET', '/videos/k?uploadId=upload-1&max-parts=abc'), OWNER_ANSWERS.maxPartsForm());
    await expectOwner(fx.app.fetch('GET', '/videos?list-type=2&max-keys=abc'), OWNER_ANSWERS.maxKeysForm());
  });
});
