import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createLogger, runChain } from '../../images/service-kit/src/index.js';
import { assertTextArgument, type BucketInfo } from '../../images/object-model/src/index.js';
import { crossOrigin } from '../../images/gateway/src/middleware/cors.js';
import { errorRenderer } from '../../images/gateway/src/middleware/errors.js';
import { codeOf, handlerFixture } from './handler-app.js';

/** Answers given as S3 gives them (issue #40): validation before NotImplemented, encryption headers on reads. */
describe('gateway handlers: answers as S3 gives them', () => {
  const fx = handlerFixture((layer) => {
    layer.addBucket('photos', 'alice');
  });
  const key = randomBytes(32).toString('base64');
  const keyMd5 = createHash('md5').update(Buffer.from(key, 'base64')).digest('base64');
  const sseC = {
    'x-amz-server-side-encryption-customer-algorithm': 'AES256',
    'x-amz-server-side-encryption-customer-key': key,
    'x-amz-server-side-encryption-customer-key-md5': keyMd5,
  };

  async function answer(method: string, target: string, headers: Record<string, string>): Promise<[number, string | undefined]> {
    const r = await fx.app.fetch(method, target, { headers, body: method === 'PUT' ? 'body' : undefined });
    return [r.status, method === 'HEAD' ? (r.headers.get('x-amz-error-code') ?? undefined) : codeOf(await r.text())];
  }

  it('a malformed canned ACL or malformed encryption headers get 400 InvalidArgument before any 501, and nothing is stored', async () => {
    const invalid: [string, string, Record<string, string>][] = [
      ['PUT', '/photos/a', { 'x-amz-acl': 'bogus', 'x-amz-server-side-encryption': 'AES256' }],
      ['PUT', '/photos/a', { 'x-amz-acl': 'bogus', 'x-amz-grant-read': 'id=x' }],
      ['PUT', '/photos/a', { 'x-amz-server-side-encryption': 'bogus' }],
      ['PUT', '/photos/a', { 'x-amz-server-side-encryption': 'AES256', ...sseC }],
      ['PUT', '/photos/a', { 'x-amz-server-side-encryption-aws-kms-key-id': 'alias/k' }],
      ['PUT', '/photos/a', { ...sseC, 'x-amz-server-side-encryption-customer-key-md5': keyMd5.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')) }],
      ['PUT', '/photos/a', { 'x-amz-server-side-encryption-customer-algorithm': 'AES256' }],
      ['PUT', '/photos/a', { ...sseC, 'x-amz-server-side-encryption-customer-algorithm': 'AES128' }],
      ['POST', '/photos/a?uploads', { 'x-amz-acl': 'public-read', 'x-amz-storage-class': 'GLACIER' }],
      ['PUT', '/photos/a?acl', { 'x-amz-acl': 'bogus' }],
      ['PUT', '/photos?acl', { 'x-amz-acl': 'bogus' }],
    ];
    for (const [method, target, headers] of invalid) {
      const [status, code] = await answer(method, target, headers);
      expect(status, `${method} ${target} ${JSON.stringify(headers)}`).to.equal(400);
      expect(code, `${method} ${target} ${JSON.stringify(headers)}`).to.be.oneOf(['InvalidArgument', 'InvalidStorageClass']);
    }
    // A well-formed public ACL on a bucket with ACLs off (BucketOwnerEnforced, the default) is S3's 400.
    expect(await answer('PUT', '/photos/a', { 'x-amz-acl': 'public-read' })).to.deep.equal([400, 'AccessControlListNotSupported']);
    expect(fx.layer.callsOf('putObject')).to.deep.equal([]);
  });

  it('Content-Encoding: aws-chunked on a plain body (no decoded length, not signed as a stream) stores the body as sent', async () => {
    for (const [encoding, stored] of [
      ['aws-chunked', undefined],
      ['aws-chunked,gzip', 'gzip'],
    ] as const) {
      const r = await fx.app.fetch('PUT', '/photos/plain', { headers: { 'content-encoding': encoding }, body: 'hello' });
      expect(r.status, encoding).to.equal(200);
      const [, , input, bytes] = fx.layer.callsOf('putObject').at(-1) as [string, string, { headers?: Record<string, string> }, Buffer];
      expect([bytes.toString(), input.headers?.['content-encoding']], encoding).to.deep.equal(['hello', stored]);
    }
  });

  it('user metadata sent as UTF-8 bytes is stored as that text and answered as S3 answers non-ASCII: one RFC 2047 encoded word', async () => {
    const text = 'Grüße ✓ 日本';
    const encoded = `=?UTF-8?B?${Buffer.from(text).toString('base64')}?=`;
    // The header's bytes are the UTF-8 of the text (a string of one character per byte is how fetch sends bytes).
    const put = await fx.app.fetch('PUT', '/photos/meta', {
      headers: { 'x-amz-meta-note': Buffer.from(text).toString('latin1'), 'x-amz-meta-word': encoded },
      body: 'x',
    });
    expect(put.status).to.equal(200);
    const [, , input] = fx.layer.callsOf('putObject').at(-1) as [string, string, { userMetadata: Record<string, string> }];
    expect(input.userMetadata).to.deep.equal({ note: text, word: text });
    const get = await fx.app.fetch('GET', '/photos/meta');
    expect([get.status, get.headers.get('x-amz-meta-note'), get.headers.get('x-amz-meta-word')]).to.deep.equal([200, encoded, encoded]);
  });

  it('control characters in keys and listing arguments are accepted, as S3 accepts them; listings carry them as character references or URL-encoded', async () => {
    for (const path of ['/photos/line%0Abreak', '/photos/tab%09and%01bell', '/photos/cr%0D%7F']) {
      const r = await fx.app.fetch('PUT', path, { body: 'x' });
      expect(r.status, path).to.equal(200);
    }
    expect(fx.layer.callsOf('putObject').map((c) => c[1])).to.deep.equal(['line\nbreak', 'tab\tand\u0001bell', 'cr\r\u007f']);
    const raw = await (await fx.app.fetch('GET', '/photos?list-type=2')).text();
    expect(raw).to.contain('<Key>line&#x0A;break</Key>').and.contain('<Key>tab&#x09;and&#x01;bell</Key>').and.contain('<Key>cr&#x0D;\u007f</Key>');
    const encoded = await (await fx.app.fetch('GET', '/photos?list-type=2&encoding-type=url&prefix=line%0A')).text();
    expect(encoded).to.contain('<Key>line%0Abreak</Key>').and.contain('<Prefix>line%0A</Prefix>');
    expect(fx.layer.callsOf('listObjects').at(-1)![1]).to.deep.include({ prefix: 'line\n' });
    for (const [name, value] of [
      ['prefix', 'a\nb'],
      ['delimiter', '\t'],
      ['start-after', '\u0001'],
      ['marker', '\u007f'],
    ])
      expect(() => assertTextArgument(name!, value!), name).not.to.throw();
    expect(() => assertTextArgument('prefix', 'a\u0000')).to.throw('prefix must not contain NUL');
    const nul = await fx.app.fetch('PUT', '/photos/nul%00');
    expect([nul.status, codeOf(await nul.text())]).to.deep.equal([400, 'InvalidObjectName']);
  });

  it('SSE-S3/KMS headers on GET and HEAD are 400 InvalidArgument; a customer key stays InvalidRequest', async () => {
    fx.layer.store('photos', 'plain', Buffer.from('plain'));
    for (const method of ['GET', 'HEAD']) {
      for (const headers of <Record<string, string>[]>[{ 'x-amz-server-side-encryption': 'aws:kms' }, { 'x-amz-server-side-encryption-aws-kms-key-id': 'k' }])
        expect((await answer(method, '/photos/plain', headers))[0], `${method} ${JSON.stringify(headers)}`).to.equal(400);
      expect(await answer('GET', '/photos/plain', { 'x-amz-server-side-encryption': 'AES256' })).to.deep.equal([400, 'InvalidArgument']);
    }
    // A customer key goes on to the object layer, which judges it against the object (the data plane:
    // InvalidRequest for an object not encrypted with one, test/data-plane/encryption.test.ts).
    await answer('GET', '/photos/plain', sseC);
    const input = fx.layer.callsOf('getObject').at(-1)?.[2] as { sse?: unknown };
    expect(input.sse).to.deep.equal({ customerKey: key });
    expect(await answer('GET', '/photos/plain', {})).to.deep.equal([200, undefined]);
  });
});

describe('gateway CORS answers as S3 gives them', () => {
  let server: http.Server;
  let url: string;
  before(async () => {
    const logger = createLogger('cors-answers-test', 'silent');
    const rules = [
      { allowedOrigins: ['https://app.example'], allowedMethods: ['GET', 'PUT'], allowedHeaders: ['*'], exposeHeaders: ['ETag'], maxAgeSeconds: 600 },
    ];
    const buckets = { lookup: async (name: string) => (name === 'ruled' ? { cors: rules } : {}) as unknown as BucketInfo };
    // What the S3 endpoint would answer for a request that got through: 200, or 403 for an OPTIONS (it signs nothing).
    const endpoint = (req: http.IncomingMessage, res: http.ServerResponse) => {
      res.statusCode = req.method === 'OPTIONS' ? 403 : 200;
      res.end();
    };
    const chain = [crossOrigin(['*'], buckets), endpoint];
    const renderError = errorRenderer(logger);
    server = http.createServer((req, res) => runChain(chain, req, res, renderError));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('an OPTIONS without Origin is 400 BadRequest, on a bucket with rules or without', async () => {
    for (const target of ['/ruled/k', '/plain/k', '/']) {
      const r = await fetch(url + target, { method: 'OPTIONS', headers: { 'access-control-request-method': 'GET' } });
      expect([r.status, codeOf(await r.text())], target).to.deep.equal([400, 'BadRequest']);
    }
  });

  it("a request allowed by a bucket's rule gets the rule's methods and max age, as a preflight does", async () => {
    const r = await fetch(`${url}/ruled/k`, { headers: { origin: 'https://app.example' } });
    expect(r.status).to.equal(200);
    expect(Object.fromEntries([...r.headers].filter(([h]) => h.startsWith('access-control-')))).to.deep.equal({
      'access-control-allow-origin': 'https://app.example',
      'access-control-allow-methods': 'GET, PUT',
      'access-control-expose-headers': 'ETag',
      'access-control-max-age': '600',
    });
    const refused = await fetch(`${url}/ruled/k`, { method: 'DELETE', headers: { origin: 'https://app.example' } });
    expect([refused.status, refused.headers.get('access-control-allow-methods')]).to.deep.equal([200, null]);
  });
});
