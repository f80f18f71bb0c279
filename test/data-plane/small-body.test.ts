import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { readSmallBody } from '../../images/data-plane/src/backends/metered-body.js';
import { S3Error } from '../../images/object-model/src/index.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const codeOf = async (p: Promise<unknown>) =>
  (
    (await p.then(
      () => undefined,
      (e: unknown) => e,
    )) as S3Error | undefined
  )?.code;

describe('readSmallBody (inline bodies read whole)', () => {
  it('joins the chunks in order, hashes them and checks the declared size and MD5', async () => {
    const parts = [Buffer.from('abc'), Buffer.alloc(0), Buffer.from([0, 1, 2]), Buffer.alloc(3000, 9)];
    const whole = Buffer.concat(parts);
    const read = await readSmallBody(Readable.from(parts), { expectedSize: whole.length, expectedMd5: md5(whole) });
    expect(read).to.deep.equal({ data: whole, size: whole.length, md5: md5(whole) });
    const one = Buffer.from('one chunk');
    expect((await readSmallBody(Readable.from([one]), {})).data).to.equal(one);
    expect((await readSmallBody(Readable.from([]), { expectedSize: 0 })).data).to.deep.equal(Buffer.alloc(0));
  });

  it('refuses a short body, a wrong digest and a body past its limit, as the streamed path does', async () => {
    expect(await codeOf(readSmallBody(Readable.from([Buffer.from('short')]), { expectedSize: 10 }))).to.equal('IncompleteBody');
    expect(await codeOf(readSmallBody(Readable.from([Buffer.from('body')]), { expectedMd5: md5(Buffer.from('other')) }))).to.equal('BadDigest');
    expect(await codeOf(readSmallBody(Readable.from([Buffer.alloc(6), Buffer.alloc(6)]), { expectedSize: 8 }))).to.equal('InvalidRequest');
    expect(await codeOf(readSmallBody(Readable.from([Buffer.alloc(6), Buffer.alloc(6)]), { maxSize: 8 }))).to.equal('EntityTooLarge');
  });

  it('rejects with the error of a failing body, and a later error of that body ends nothing', async () => {
    const body = new PassThrough();
    const read = readSmallBody(body, { expectedSize: 100 });
    body.write(Buffer.alloc(10));
    body.destroy(new Error('client reset'));
    expect(((await read.catch((e: unknown) => e)) as Error).message).to.equal('client reset');
    const refused = new PassThrough();
    const tooLong = readSmallBody(refused, { expectedSize: 4 });
    refused.write(Buffer.alloc(8));
    expect(await codeOf(tooLong)).to.equal('InvalidRequest');
    refused.destroy(new Error('reset after the refusal'));
    await new Promise((r) => setImmediate(r));
  });
});
