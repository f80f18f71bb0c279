import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { codeOf, handlerFixture } from './handler-app.js';

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const completion = (parts: Array<[number, string]>) =>
  `<CompleteMultipartUpload>${parts.map(([n, etag]) => `<Part><PartNumber>${n}</PartNumber><ETag>"${etag}"</ETag></Part>`).join('')}</CompleteMultipartUpload>`;

/** The gateway's multipart handlers against a fake object layer. */
describe('gateway handlers: multipart uploads, against a fake ObjectLayer', () => {
  const fx = handlerFixture((layer) => layer.addBucket('videos', 'alice'));

  it('create, upload parts, complete: each request is one call with what it parsed, each answer rendered as S3 does', async () => {
    const created = await fx.app.fetch('POST', '/videos/film.mp4?uploads', { headers: { 'content-type': 'video/mp4', 'x-amz-meta-title': 'Film' } });
    const createdXml = await created.text();
    expect(created.status).to.equal(200);
    expect(createdXml).to.contain('<UploadId>upload-1</UploadId>').and.contain('<Key>film.mp4</Key>');
    expect(fx.layer.callsOf('createMultipart')[0]).to.deep.include.members(['videos', 'film.mp4']);
    expect(fx.layer.callsOf('createMultipart')[0]![2]).to.deep.include({ owner: 'alice', contentType: 'video/mp4', userMetadata: { title: 'Film' } });

    // Every part but the last is at least 5 MiB (S3's rule, which the object layer keeps).
    const first = 'first-'.padEnd(5 * 1024 * 1024, '.');
    const part1 = await fx.app.fetch('PUT', '/videos/film.mp4?partNumber=1&uploadId=upload-1', { body: first });
    const part2 = await fx.app.fetch('PUT', '/videos/film.mp4?partNumber=2&uploadId=upload-1', { body: 'second' });
    expect([part1.status, part1.headers.get('etag'), part2.headers.get('etag')]).to.deep.equal([200, `"${md5(first)}"`, `"${md5('second')}"`]);
    expect(fx.layer.callsOf('uploadPart').map(([, , uploadId, n, bytes]) => [uploadId, n, String(bytes)])).to.deep.equal([
      ['upload-1', 1, first],
      ['upload-1', 2, 'second'],
    ]);

    const done = await fx.app.fetch('POST', '/videos/film.mp4?uploadId=upload-1', {
      headers: { 'if-none-match': '*' },
      body: completion([
        [1, md5(first)],
        [2, md5('second')],
      ]),
    });
    const doneXml = await done.text();
    expect(done.status).to.equal(200);
    expect(doneXml).to.contain('<CompleteMultipartUploadResult').and.contain('<Bucket>videos</Bucket>').and.contain(`-2&quot;</ETag>`);
    expect(fx.layer.callsOf('completeMultipart')).to.deep.equal([
      [
        'videos',
        'film.mp4',
        'upload-1',
        [
          { partNumber: 1, etag: md5(first) },
          { partNumber: 2, etag: md5('second') },
        ],
        { ifNoneMatch: '*' },
      ],
    ]);
    expect(fx.layer.objects.get('videos/film.mp4')?.bytes.toString()).to.equal(`${first}second`);
  });

  it('parts out of order, no parts, a bad part number: the object layer refuses them (rule-owners.test.ts); a malformed Part never reaches it', async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    const outOfOrder = await fx.app.fetch('POST', '/videos/k?uploadId=upload-1', {
      body: completion([
        [2, 'a'],
        [1, 'b'],
      ]),
    });
    expect([outOfOrder.status, codeOf(await outOfOrder.text())]).to.deep.equal([400, 'InvalidPartOrder']);
    const twice = await fx.app.fetch('POST', '/videos/k?uploadId=upload-1', {
      body: completion([
        [1, 'a'],
        [1, 'a'],
      ]),
    });
    expect([twice.status, codeOf(await twice.text())], 'a part number listed twice').to.deep.equal([400, 'InvalidPartOrder']);
    const empty = await fx.app.fetch('POST', '/videos/k?uploadId=upload-1', { body: '<CompleteMultipartUpload></CompleteMultipartUpload>' });
    expect(codeOf(await empty.text())).to.equal('MalformedXML');
    const badPart = await fx.app.fetch('PUT', '/videos/k?partNumber=10001&uploadId=upload-1', { body: 'x' });
    expect([badPart.status, codeOf(await badPart.text())]).to.deep.equal([400, 'InvalidArgument']);
    expect(fx.layer.callsOf('completeMultipart')).to.have.length(3);
    expect(fx.layer.callsOf('uploadPart')).to.have.length(1);
    // The document's shape is the gateway's: a PartNumber that is no number, or a Part without ETag, is MalformedXML.
    for (const part of ['<PartNumber>one</PartNumber><ETag>"a"</ETag>', '<PartNumber>1</PartNumber>']) {
      const malformed = await fx.app.fetch('POST', '/videos/k?uploadId=upload-1', {
        body: `<CompleteMultipartUpload><Part>${part}</Part></CompleteMultipartUpload>`,
      });
      expect([malformed.status, codeOf(await malformed.text())], part).to.deep.equal([400, 'MalformedXML']);
    }
    expect(fx.layer.callsOf('completeMultipart')).to.have.length(3);
    // A part number that is no number is refused by the gateway: nothing to pass on.
    const notNumber = await fx.app.fetch('PUT', '/videos/k?partNumber=one&uploadId=upload-1', { body: 'x' });
    expect([notNumber.status, codeOf(await notNumber.text())]).to.deep.equal([400, 'InvalidArgument']);
    expect(fx.layer.callsOf('uploadPart')).to.have.length(1);
  });

  it("the object layer's errors are rendered from the S3 error table: InvalidPart, NoSuchUpload", async () => {
    await fx.app.fetch('POST', '/videos/k?uploads');
    await fx.app.fetch('PUT', '/videos/k?partNumber=1&uploadId=upload-1', { body: 'x' });
    const wrongEtag = await fx.app.fetch('POST', '/videos/k?uploadId=upload-1', { body: completion([[1, md5('y')]]) });
    expect([wrongEtag.status, codeOf(await wrongEtag.text())]).to.deep.equal([400, 'InvalidPart']);
    expect((await fx.app.fetch('DELETE', '/videos/k?uploadId=upload-1')).status).to.equal(204);
    const gone = await fx.app.fetch('DELETE', '/videos/k?uploadId=upload-1');
    const xml = await gone.text();
    expect([gone.status, codeOf(xml)]).to.deep.equal([404, 'NoSuchUpload']);
    expect(xml).to.contain('<UploadId>upload-1</UploadId>');
    expect(fx.layer.callsOf('abortMultipart')).to.deep.equal([
      ['videos', 'k', 'upload-1'],
      ['videos', 'k', 'upload-1'],
    ]);
  });
});
