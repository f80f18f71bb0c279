import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { sendAllThenRead } from '../support/http.js';
import { ROOT_PASSWORD, ROOT_USER } from './support/platform.js';
import { sendRaw, signRaw, type RawOutcome, type RawRequest } from './support/raw-http.js';
import { bodyText, describeWithBucket, expectAbsent, s3ErrorOf } from './support/s3.js';

/** A raw request's bytes up to its body's end, as written on the wire (keep-alive: no connection header). */
function wire(req: RawRequest): string {
  return `${req.method} ${req.target} HTTP/1.1\r\n${req.headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${req.body?.toString('latin1') ?? ''}`;
}

const status = (o: RawOutcome) => (o.kind === 'answered' ? o.status : o.kind);

/**
 * Every answer reaches its client, is its own request's, and comes within seconds: raw connections that
 * pipeline garbage, send large bodies that are refused before they are read, or send what parsers choke on.
 */
describeWithBucket('e2e: answers arrive, in order, for malformed and refused requests', 'deliver', (env, bucket) => {
  const port = () => Number(new URL(env.p.endpoint).port);
  const host = () => `127.0.0.1:${port()}`;
  const root = { accessKey: ROOT_USER, secret: ROOT_PASSWORD };
  const signed = (method: string, target: string, body?: Buffer, headers: Array<[string, string]> = []) =>
    signRaw({ method, target, headers: body ? [...headers, ['content-length', String(body.length)]] : headers, body }, host(), root);

  it('a PUT followed on its connection by bytes that are no request: its own 200 first (the object stored), then 400 and a close', async () => {
    const put = signed('PUT', `/${bucket}/pipelined.txt`, Buffer.from('pipelined body'));
    const got = await sendAllThenRead(port(), wire(put), 0, 'GARBAGE\u0001 not http\r\n\r\n');
    expect(got.statuses, got.text).to.deep.equal([200, 400]);
    expect(await bodyText(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'pipelined.txt' })))).to.equal('pipelined body');
  });

  it('a PUT refused before its 32 MiB body was read: a client that reads only after sending it all gets the 403, not a reset', async () => {
    const size = 32 * 1024 * 1024;
    for (const connection of ['connection: close\r\n', '']) {
      const head = `PUT /${bucket}/refused.bin HTTP/1.1\r\nhost: ${host()}\r\ncontent-length: ${size}\r\n${connection}\r\n`;
      const got = await sendAllThenRead(port(), head, size);
      expect(got.statuses, `${got.error ?? ''} ${got.text.slice(0, 300)}`).to.deep.equal([403]);
      expect(got.error).to.equal(undefined);
    }
    await expectAbsent(env.s3, bucket, 'refused.bin');
  });

  it('a POST form whose body lacks its final boundary is MalformedPOSTRequest (400) and stores nothing', async () => {
    const post = await createPresignedPost(env.s3, { Bucket: bucket, Key: 'forms/cut.bin', Expires: 300 });
    const boundary = 'strataformboundary';
    const fields = Object.entries(post.fields)
      .map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
      .join('');
    // Small bodies: the whole form is there (and found cut) before the handler has checked the policy.
    for (const end of ['\r\n', '', '\r\n--', `\r\n--${boundary}`]) {
      const body = Buffer.from(`${fields}--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\n\r\nfile bytes${end}`);
      const req: RawRequest = {
        method: 'POST',
        target: `/${bucket}`,
        headers: [
          ['host', host()],
          ['content-type', `multipart/form-data; boundary=${boundary}`],
          ['content-length', String(body.length)],
        ],
        body,
      };
      const out = await sendRaw(port(), req, 15_000);
      expect(status(out), JSON.stringify(end)).to.equal(400);
      expect(out.kind === 'answered' && s3ErrorOf(out.body.toString()).code, JSON.stringify(end)).to.equal('MalformedPOSTRequest');
    }
    await expectAbsent(env.s3, bucket, 'forms/cut.bin');
  });

  it('response-content-disposition holding U+202E is served with that character percent-encoded (UTF-8), not 500', async () => {
    await env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'pipelined.txt' }));
    const value = 'attachment; filename="\u202Etxt.exe"';
    const out = await sendRaw(port(), signed('GET', `/${bucket}/pipelined.txt?response-content-disposition=${encodeURIComponent(value)}`), 15_000);
    expect(status(out)).to.equal(200);
    expect(out.kind === 'answered' && out.headers['content-disposition']).to.equal('attachment; filename="%E2%80%AEtxt.exe"');
  });

  it('what hung before is answered within seconds: a listing 200, the rest 4xx (or 501 for what Strata leaves out)', async () => {
    const cases: Array<[string, RawRequest]> = [
      ['listing with prefix fz/&#0;', signed('GET', `/${bucket}?prefix=fz/%26%230%3B`)],
      ['ListObjectsV2 with prefix fz/&#0;', signed('GET', `/${bucket}?list-type=2&prefix=fz/%26%230%3B`)],
      [
        '?restore with an XML comment',
        signed('POST', `/${bucket}/pipelined.txt?restore`, Buffer.from('<RestoreRequest><!-- c --><Days>1</Days></RestoreRequest>')),
      ],
      ['?mdsearch&inventory on a missing bucket', signed('GET', '/no-such-bucket-delivery?mdsearch&inventory')],
      ['POST to a bucket name, no form', signed('POST', `/${bucket}`, Buffer.from('abc'), [['content-type', 'application/octet-stream']])],
      ['POST to a missing bucket name, text', signed('POST', '/no-such-bucket-delivery', Buffer.from('abc'), [['content-type', 'text/plain']])],
      ['POST to a bucket name, form without boundary', signed('POST', `/${bucket}`, Buffer.from('abc'), [['content-type', 'multipart/form-data']])],
    ];
    for (const [label, req] of cases) {
      const out = await sendRaw(port(), req, 10_000);
      const s = status(out);
      expect(typeof s === 'number' && (s < 500 || s === 501) ? 'answered' : s, label).to.equal('answered');
      if (!label.includes('prefix')) expect(s, label).to.be.at.least(400);
    }
  });
});
