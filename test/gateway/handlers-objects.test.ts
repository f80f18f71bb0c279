import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { codeOf, handlerFixture } from './handler-app.js';

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/** The gateway's object handlers against a fake object layer: what they pass it, and what they answer. */
describe('gateway handlers: objects, against a fake ObjectLayer', () => {
  const fx = handlerFixture((layer) => {
    layer.addBucket('photos', 'alice');
    layer.addBucket('theirs', 'bob');
  });

  it('PutObject passes the parsed request on (owner, type, metadata, tags, MD5, conditions) and answers its ETag', async () => {
    const r = await fx.app.fetch('PUT', '/photos/a%20b.txt', {
      headers: {
        'content-type': 'text/plain',
        'x-amz-meta-Colour': 'blue',
        'x-amz-tagging': 'team=web&year=2026',
        'content-md5': createHash('md5').update('hello').digest('base64'),
        'if-none-match': '*',
        'cache-control': 'no-cache',
      },
      body: 'hello',
    });
    expect(r.status).to.equal(200);
    expect(r.headers.get('etag')).to.equal(`"${md5('hello')}"`);
    const [[bucket, key, input, bytes]] = fx.layer.callsOf('putObject') as [[string, string, Record<string, unknown>, Buffer]];
    expect([bucket, key, bytes.toString()]).to.deep.equal(['photos', 'a b.txt', 'hello']);
    expect(input).to.deep.include({
      owner: 'alice',
      contentType: 'text/plain',
      contentLength: 5,
      userMetadata: { colour: 'blue' },
      tags: [
        { key: 'team', value: 'web' },
        { key: 'year', value: '2026' },
      ],
      contentMd5: createHash('md5').update('hello').digest('base64'),
      ifNoneMatch: '*',
      headers: { 'cache-control': 'no-cache' },
    });
    const again = await fx.app.fetch('PUT', '/photos/a%20b.txt', { headers: { 'if-none-match': '*' }, body: 'again' });
    expect(again.status).to.equal(412);
    expect(codeOf(await again.text())).to.equal('PreconditionFailed');
  });

  it('refuses what the object layer must never see: too much metadata, a bad key, a bucket of another tenant', async () => {
    const big = await fx.app.fetch('PUT', '/photos/k', { headers: { 'x-amz-meta-big': 'x'.repeat(2100) }, body: 'x' });
    expect([big.status, codeOf(await big.text())]).to.deep.equal([400, 'MetadataTooLarge']);
    const dots = await fx.app.fetch('PUT', '/photos/a%00b', { body: 'x' });
    expect(codeOf(await dots.text())).to.equal('InvalidObjectName');
    const other = await fx.app.fetch('GET', '/theirs/k');
    expect([other.status, codeOf(await other.text())]).to.deep.equal([403, 'AccessDenied']);
    expect(fx.layer.calls.map((c) => c.op)).to.deep.equal([]);
  });

  it('GetObject renders the read: status, standard headers, metadata, tag count, response-* overrides, body', async () => {
    const meta = fx.layer.store('photos', 'cat.jpg', Buffer.from('meow meow'), {
      contentType: 'image/jpeg',
      userMetadata: { colour: 'grey' },
      tags: [{ key: 'a', value: '1' }],
      headers: { 'cache-control': 'max-age=60' },
    });
    const r = await fx.app.fetch('GET', '/photos/cat.jpg?response-content-disposition=attachment');
    expect(r.status).to.equal(200);
    expect(await r.text()).to.equal('meow meow');
    expect(
      Object.fromEntries(
        [
          'content-length',
          'content-type',
          'etag',
          'last-modified',
          'x-amz-meta-colour',
          'x-amz-tagging-count',
          'cache-control',
          'content-disposition',
          'accept-ranges',
        ].map((h) => [h, r.headers.get(h)]),
      ),
    ).to.deep.equal({
      'content-length': '9',
      'content-type': 'image/jpeg',
      etag: `"${meta.etag}"`,
      'last-modified': new Date(meta.lastModified).toUTCString(),
      'x-amz-meta-colour': 'grey',
      'x-amz-tagging-count': '1',
      'cache-control': 'max-age=60',
      'content-disposition': 'attachment',
      'accept-ranges': 'bytes',
    });
    const [[, , input]] = fx.layer.callsOf('getObject') as [[string, string, Record<string, unknown>]];
    const { bucketRecord, ...rest } = input;
    expect(rest).to.deep.equal({ method: 'GET', range: undefined, partNumber: undefined, conditions: undefined, sse: undefined });
    // The record the read was authorised against travels with it (one resolution per request).
    expect(bucketRecord).to.include({ name: 'photos', owner: 'alice' });
  });

  it('a Range GET passes the range on and answers 206 with its Content-Range', async () => {
    fx.layer.store('photos', 'r.bin', Buffer.from('0123456789'));
    const r = await fx.app.fetch('GET', '/photos/r.bin', { headers: { range: 'bytes=2-5' } });
    expect([r.status, r.headers.get('content-range'), await r.text()]).to.deep.equal([206, 'bytes 2-5/10', '2345']);
    expect((fx.layer.callsOf('getObject')[0]![2] as { range: string }).range).to.equal('bytes=2-5');
  });

  it('conditional GET and HEAD: the conditions go to the object layer, which answers 304 / 412 without opening a body', async () => {
    const meta = fx.layer.store('photos', 'c.txt', Buffer.from('content'));
    const later = new Date(Date.parse(meta.lastModified) + 60_000).toUTCString();
    const notModified = await fx.app.fetch('GET', '/photos/c.txt', { headers: { 'if-none-match': `"${meta.etag}"` } });
    expect([notModified.status, notModified.headers.get('etag'), await notModified.text()]).to.deep.equal([304, `"${meta.etag}"`, '']);
    expect((fx.layer.callsOf('getObject')[0]![2] as { conditions: unknown }).conditions).to.deep.equal({ ifNoneMatch: `"${meta.etag}"` });
    const since = await fx.app.fetch('GET', '/photos/c.txt', { headers: { 'if-modified-since': later } });
    expect(since.status).to.equal(304);
    const failed = await fx.app.fetch('GET', '/photos/c.txt', { headers: { 'if-match': '"0123"', 'if-none-match': `"${meta.etag}"` } });
    expect(failed.status).to.equal(412);
    const xml = await failed.text();
    expect(codeOf(xml)).to.equal('PreconditionFailed');
    expect(xml).to.contain('<Condition>If-Match</Condition>');
    const head = await fx.app.fetch('HEAD', '/photos/c.txt', {
      headers: { 'if-unmodified-since': new Date(Date.parse(meta.lastModified) - 60_000).toUTCString() },
    });
    expect(head.status).to.equal(412);
    expect(fx.layer.bodiesOpened).to.equal(0);
    const served = await fx.app.fetch('GET', '/photos/c.txt', { headers: { 'if-match': meta.etag, 'if-unmodified-since': 'not a date' } });
    expect([served.status, await served.text()]).to.deep.equal([200, 'content']);
    expect(fx.layer.bodiesOpened).to.equal(1);
  });

  it('HeadObject answers the headers and no body; a missing key is NoSuchKey (404, no body on HEAD, XML on GET)', async () => {
    fx.layer.store('photos', 'h.txt', Buffer.from('four'));
    const head = await fx.app.fetch('HEAD', '/photos/h.txt');
    expect([head.status, head.headers.get('content-length'), await head.text()]).to.deep.equal([200, '4', '']);
    expect(fx.layer.bodiesOpened).to.equal(0);
    const missingHead = await fx.app.fetch('HEAD', '/photos/nope');
    expect([missingHead.status, await missingHead.text()]).to.deep.equal([404, '']);
    const missing = await fx.app.fetch('GET', '/photos/nope');
    const xml = await missing.text();
    expect([missing.status, codeOf(xml)]).to.deep.equal([404, 'NoSuchKey']);
    expect(xml).to.contain('<Key>nope</Key>');
  });

  it('DeleteObject passes its conditions on and answers 204', async () => {
    fx.layer.store('photos', 'd.txt', Buffer.from('x'));
    expect((await fx.app.fetch('DELETE', '/photos/d.txt')).status).to.equal(204);
    fx.layer.store('photos', 'd.txt', Buffer.from('x'), { etag: 'e1' });
    expect((await fx.app.fetch('DELETE', '/photos/d.txt', { headers: { 'if-match': '"e1"', 'x-amz-if-match-size': '1' } })).status).to.equal(204);
    expect(fx.layer.callsOf('deleteObject')).to.deep.equal([
      ['photos', 'd.txt', undefined],
      ['photos', 'd.txt', { ifMatch: '"e1"', size: 1 }],
    ]);
    const bad = await fx.app.fetch('DELETE', '/photos/d.txt', { headers: { 'x-amz-if-match-size': 'one' } });
    expect([bad.status, codeOf(await bad.text())]).to.deep.equal([400, 'InvalidArgument']);
    expect(fx.layer.callsOf('deleteObject')).to.have.length(2);
  });

  it('ListObjectsV2 passes prefix, page size and start-after on and renders the page', async () => {
    for (const k of ['a/1', 'a/2', 'b/1']) fx.layer.store('photos', k, Buffer.from(k));
    const r = await fx.app.fetch('GET', '/photos?list-type=2&prefix=a%2F&max-keys=1&start-after=a%2F0');
    const xml = await r.text();
    expect(r.status).to.equal(200);
    expect(fx.layer.callsOf('listObjects')).to.deep.equal([
      ['photos', { prefix: 'a/', delimiter: undefined, maxKeys: 1, startAfter: 'a/0', continuationToken: undefined }],
    ]);
    expect(xml)
      .to.contain('<KeyCount>1</KeyCount>')
      .and.contain('<Key>a/1</Key>')
      .and.contain('<IsTruncated>true</IsTruncated>')
      .and.contain('<NextContinuationToken>a/1</NextContinuationToken>');
    expect(xml).to.not.contain('a/2');
  });

  it('ListObjectsV2 with an empty continuation-token is 400 InvalidArgument, as S3 answers', async () => {
    const r = await fx.app.fetch('GET', '/photos?list-type=2&continuation-token=');
    expect([r.status, codeOf(await r.text())]).to.deep.equal([400, 'InvalidArgument']);
    expect(fx.layer.callsOf('listObjects')).to.deep.equal([]);
  });

  it('CopyObject passes source, directives and conditions on; a copy onto itself that changes nothing is refused', async () => {
    const source = fx.layer.store('photos', 'src', Buffer.from('bytes'), { userMetadata: { a: '1' } });
    const r = await fx.app.fetch('PUT', '/photos/dst', {
      headers: {
        'x-amz-copy-source': '/photos/src',
        'x-amz-metadata-directive': 'REPLACE',
        'x-amz-meta-b': '2',
        'x-amz-copy-source-if-match': `"${source.etag}"`,
      },
    });
    const xml = await r.text();
    expect(r.status).to.equal(200);
    expect(xml).to.contain('<CopyObjectResult').and.contain(`<ETag>&quot;${source.etag}&quot;</ETag>`);
    const [[bucket, key, input]] = fx.layer.callsOf('copyObject') as [[string, string, Record<string, unknown>]];
    expect([bucket, key]).to.deep.equal(['photos', 'dst']);
    expect(input).to.deep.include({
      owner: 'alice',
      sourceBucket: 'photos',
      sourceKey: 'src',
      metadataDirective: 'REPLACE',
      userMetadata: { b: '2' },
      taggingDirective: 'COPY',
      conditions: { ifMatch: `"${source.etag}"` },
    });
    const failed = await fx.app.fetch('PUT', '/photos/dst', {
      headers: { 'x-amz-copy-source': '/photos/src', 'x-amz-copy-source-if-none-match': `"${source.etag}"` },
    });
    expect((await failed.text()).match(/<Condition>([^<]*)</)?.[1]).to.equal('x-amz-copy-source-If-None-Match');
    const itself = await fx.app.fetch('PUT', '/photos/src', { headers: { 'x-amz-copy-source': '/photos/src' } });
    const itselfXml = await itself.text();
    expect([itself.status, codeOf(itselfXml)]).to.deep.equal([400, 'InvalidRequest']);
    expect(itselfXml).to.contain('copy an object to itself');
    // (Refused by the object layer, which judges whether a copy changes anything: rule-owners.test.ts.)
    expect(fx.layer.callsOf('copyObject')).to.have.length(3);
  });
});
