import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { awsCli } from './support/cli.js';
import { bodyBytes, describeWithBucket, rootPresign, s3ErrorOf, s3Failure } from './support/s3.js';

const STORED = {
  CacheControl: 'public, max-age=31536000, immutable',
  ContentDisposition: 'attachment; filename="report 2026.pdf"',
  ContentEncoding: 'gzip',
  ContentLanguage: 'de-CH',
  Expires: new Date('2030-01-02T03:04:05Z'),
};

/** The stored headers as the SDK parses them from a GET or HEAD answer. */
function storedOf(r: { CacheControl?: string; ContentDisposition?: string; ContentEncoding?: string; ContentLanguage?: string; Expires?: Date }) {
  return {
    CacheControl: r.CacheControl,
    ContentDisposition: r.ContentDisposition,
    ContentEncoding: r.ContentEncoding,
    ContentLanguage: r.ContentLanguage,
    Expires: r.Expires,
  };
}

describeWithBucket(
  'e2e: stored object headers (Cache-Control, Content-Disposition, Content-Encoding, Content-Language, Expires)',
  'ohdrs',
  (env, bucket) => {
    const head = (key: string) => env.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));

    it('PutObject keeps them; GET and HEAD answer them; response-* query parameters override them', async () => {
      const body = zlib.gzipSync('console.log("hello");\n');
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'app.js', Body: body, ContentType: 'text/javascript', ...STORED }));
      expect(storedOf(await head('app.js'))).to.deep.equal(STORED);
      const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'app.js' }));
      expect(storedOf(got)).to.deep.equal(STORED);
      // The bytes are the gzip stream as uploaded (the store does not decode them).
      expect((await bodyBytes(got)).equals(body)).to.equal(true);
      // A second GET is answered from the read caches: the headers come with it.
      const again = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'app.js' }));
      expect(storedOf(again)).to.deep.equal(STORED);
      expect((await bodyBytes(again)).equals(body)).to.equal(true);

      const overridden = await env.s3.send(
        new GetObjectCommand({ Bucket: bucket, Key: 'app.js', ResponseCacheControl: 'no-cache', ResponseContentDisposition: 'inline' }),
      );
      await bodyBytes(overridden);
      expect([overridden.CacheControl, overridden.ContentDisposition, overridden.ContentEncoding]).to.deep.equal(['no-cache', 'inline', 'gzip']);
    });

    it('a browser fetching the object gets Content-Encoding: gzip and so the decoded text (what a static site needs)', async () => {
      const text = 'body { color: teal }\n'.repeat(50);
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'site.css', Body: zlib.gzipSync(text), ContentType: 'text/css', ContentEncoding: 'gzip' }));
      const url = rootPresign(env.p.endpoint, 'GET', `/${bucket}/site.css`);
      // fetch decodes a gzip Content-Encoding as browsers do.
      const r = await fetch(url);
      expect([r.status, r.headers.get('content-encoding'), await r.text()]).to.deep.equal([200, 'gzip', text]);
    });

    it('a streamed upload (aws-chunked) stores only the encoding the object has, not the framing', async () => {
      const body = zlib.gzipSync('streamed');
      await env.s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: 'streamed.gz', Body: Readable.from([body]), ContentLength: body.length, ContentEncoding: 'gzip' }),
      );
      expect((await head('streamed.gz')).ContentEncoding).to.equal('gzip');
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'plain.txt', Body: Readable.from([Buffer.from('plain')]), ContentLength: 5 }));
      expect((await head('plain.txt')).ContentEncoding).to.equal(undefined);
    });

    it('an overwrite brings its own headers or none', async () => {
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'over.txt', Body: 'one', CacheControl: 'max-age=60' }));
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'over.txt', Body: 'two' }));
      expect(storedOf(await head('over.txt'))).to.deep.equal({
        CacheControl: undefined,
        ContentDisposition: undefined,
        ContentEncoding: undefined,
        ContentLanguage: undefined,
        Expires: undefined,
      });
    });

    it('CopyObject: COPY keeps the source headers, REPLACE takes the new ones', async () => {
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'src.bin', Body: 'src', ...STORED }));
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'copy.bin', CopySource: `${bucket}/src.bin` }));
      expect(storedOf(await head('copy.bin'))).to.deep.equal(STORED);
      await env.s3.send(
        new CopyObjectCommand({ Bucket: bucket, Key: 'replaced.bin', CopySource: `${bucket}/src.bin`, MetadataDirective: 'REPLACE', CacheControl: 'no-store' }),
      );
      const replaced = await head('replaced.bin');
      expect([replaced.CacheControl, replaced.ContentEncoding, replaced.ContentDisposition]).to.deep.equal(['no-store', undefined, undefined]);
    });

    it("multipart: the headers of CreateMultipartUpload become the completed object's", async () => {
      const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin', ...STORED }));
      const part = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'parts.bin', UploadId, PartNumber: 1, Body: 'only part' }));
      await env.s3.send(
        new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'parts.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] } }),
      );
      expect(storedOf(await head('parts.bin'))).to.deep.equal(STORED);
    });

    it('x-amz-website-redirect-location (WebsiteRedirectLocation) is kept and answered like them; a value that is no path or URL stores nothing', async () => {
      const redirect = (r: { WebsiteRedirectLocation?: string }) => r.WebsiteRedirectLocation;
      await env.s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: 'old.html', Body: '<p>moved</p>', ContentType: 'text/html', WebsiteRedirectLocation: '/new.html' }),
      );
      expect(redirect(await head('old.html'))).to.equal('/new.html');
      const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'old.html' }));
      // The REST endpoint serves the object itself, as S3's does (only a website endpoint would redirect).
      expect([redirect(got), (await bodyBytes(got)).toString()]).to.deep.equal(['/new.html', '<p>moved</p>']);
      await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'away.html', Body: 'x', WebsiteRedirectLocation: 'https://example.com/elsewhere' }));
      expect(redirect(await head('away.html'))).to.equal('https://example.com/elsewhere');

      // As S3, a copy never takes its source's redirect ("unique to each object"): it has the one its request
      // names, with either directive; COPY keeps the source's other headers.
      await env.s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: 'cached.html', Body: 'c', CacheControl: 'max-age=9', WebsiteRedirectLocation: '/from-source.html' }),
      );
      await env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'plain-copy.html', CopySource: `${bucket}/cached.html` }));
      const plain = await head('plain-copy.html');
      expect([redirect(plain), plain.CacheControl]).to.deep.equal([undefined, 'max-age=9']);
      await env.s3.send(
        new CopyObjectCommand({ Bucket: bucket, Key: 'named-copy.html', CopySource: `${bucket}/cached.html`, WebsiteRedirectLocation: '/named.html' }),
      );
      const named = await head('named-copy.html');
      expect([redirect(named), named.CacheControl]).to.deep.equal(['/named.html', 'max-age=9']);
      await env.s3.send(
        new CopyObjectCommand({
          Bucket: bucket,
          Key: 'old-copy.html',
          CopySource: `${bucket}/old.html`,
          MetadataDirective: 'REPLACE',
          WebsiteRedirectLocation: '/newer.html',
        }),
      );
      expect(redirect(await head('old-copy.html'))).to.equal('/newer.html');
      // Onto itself: a new redirect location is a change (S3 allows it); without one it is InvalidRequest.
      await env.s3.send(
        new CopyObjectCommand({ Bucket: bucket, Key: 'cached.html', CopySource: `${bucket}/cached.html`, WebsiteRedirectLocation: '/moved-again.html' }),
      );
      const self = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'cached.html' }));
      expect([redirect(self), self.CacheControl, (await bodyBytes(self)).toString()]).to.deep.equal(['/moved-again.html', 'max-age=9', 'c']);
      expect((await s3Failure(env.s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'cached.html', CopySource: `${bucket}/cached.html` })))).name).to.equal(
        'InvalidRequest',
      );
      // Uploads in parts take CreateMultipartUpload's.
      const { UploadId } = await env.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'parts.html', WebsiteRedirectLocation: '/p.html' }));
      const part = await env.s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'parts.html', UploadId, PartNumber: 1, Body: 'part' }));
      await env.s3.send(
        new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'parts.html', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] } }),
      );
      expect(redirect(await head('parts.html'))).to.equal('/p.html');

      // Neither a relative name, another scheme nor more than 2 KiB: refused before any byte is stored.
      for (const [key, value] of [
        ['rel.html', 'new.html'],
        ['ftp.html', 'ftp://example.com/x'],
        ['long.html', `/${'a'.repeat(2048)}`],
      ]) {
        const failure = await s3Failure(env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'x', WebsiteRedirectLocation: value })));
        expect([failure.status, failure.name], value.slice(0, 20)).to.deep.equal([400, 'InvalidRedirectLocation']);
        expect((await s3Failure(head(key))).status).to.equal(404);
      }
      const badCopy = await s3Failure(
        env.s3.send(
          new CopyObjectCommand({
            Bucket: bucket,
            Key: 'old.html',
            CopySource: `${bucket}/away.html`,
            MetadataDirective: 'REPLACE',
            WebsiteRedirectLocation: 'x',
          }),
        ),
      );
      expect(badCopy.name).to.equal('InvalidRedirectLocation');
      expect(redirect(await head('old.html'))).to.equal('/new.html');
    });

    it("a form upload keeps the form's Cache-Control and Content-Disposition fields; a value no HTTP answer can carry stores nothing", async () => {
      const post = await createPresignedPost(env.s3, {
        Bucket: bucket,
        Key: 'form.txt',
        Expires: 300,
        Fields: { 'Cache-Control': 'max-age=5', 'Content-Disposition': 'inline' },
      });
      const submit = async (fields: Record<string, string>) => {
        const form = new FormData();
        for (const [name, value] of Object.entries(fields)) form.append(name, value);
        form.append('file', new Blob(['form body']), 'f.txt');
        return fetch(post.url, { method: 'POST', body: form });
      };
      const ok = await submit(post.fields);
      expect(ok.status, await ok.clone().text()).to.equal(204);
      const h = await head('form.txt');
      expect([h.CacheControl, h.ContentDisposition]).to.deep.equal(['max-age=5', 'inline']);

      const badPost = await createPresignedPost(env.s3, {
        Bucket: bucket,
        Key: 'form-bad.txt',
        Expires: 300,
        Conditions: [['starts-with', '$Content-Disposition', '']],
      });
      const bad = await submit({ ...badPost.fields, 'Content-Disposition': 'attachment; filename="東京.txt"' });
      expect([bad.status, s3ErrorOf(await bad.text()).code]).to.deep.equal([400, 'InvalidArgument']);
      expect((await s3Failure(head('form-bad.txt'))).status).to.equal(404);
    });

    it('the Debian AWS CLI v2 sets them with `s3 cp` (one PUT and in parts) and reads them with head-object', async () => {
      const home = await mkdtemp(path.join(os.tmpdir(), 'strata-ohdrs-'));
      try {
        const aws = awsCli(env.p.endpoint, home);
        const small = path.join(home, 'small.html');
        const big = path.join(home, 'big.bin');
        await writeFile(small, '<p>hi</p>');
        await writeFile(big, Buffer.alloc(10 * 1024 * 1024, 7));
        for (const [file, key] of [
          [small, 'cli/small.html'],
          [big, 'cli/big.bin'],
        ]) {
          const cp = await aws(
            's3',
            'cp',
            file,
            `s3://${bucket}/${key}`,
            '--cache-control',
            'max-age=120',
            '--content-language',
            'fr',
            '--content-disposition',
            'inline',
            '--website-redirect',
            '/moved.html',
          );
          expect(cp.code, cp.stderr).to.equal(0);
          const got = await aws('s3api', 'head-object', '--bucket', bucket, '--key', key);
          expect(got.code, got.stderr).to.equal(0);
          const answer = JSON.parse(got.stdout) as {
            CacheControl?: string;
            ContentLanguage?: string;
            ContentDisposition?: string;
            WebsiteRedirectLocation?: string;
          };
          expect([answer.CacheControl, answer.ContentLanguage, answer.ContentDisposition, answer.WebsiteRedirectLocation], key).to.deep.equal([
            'max-age=120',
            'fr',
            'inline',
            '/moved.html',
          ]);
        }
        const bad = await aws('s3', 'cp', small, `s3://${bucket}/cli/bad.html`, '--website-redirect', 'moved.html');
        expect([bad.code, bad.stderr]).to.satisfy(([code, stderr]: [number, string]) => code !== 0 && stderr.includes('InvalidRedirectLocation'));
      } finally {
        await rm(home, { recursive: true, force: true });
      }
    });
  },
  180_000,
);
