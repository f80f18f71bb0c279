import { GetObjectCommand, GetObjectTaggingCommand, S3Client } from '@aws-sdk/client-s3';
import { createPresignedPost, type PresignedPostOptions } from '@aws-sdk/s3-presigned-post';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { bodyBytes, createTenant, describeWithBucket, expectAbsent, md5Hex, rootPresign, s3ErrorOf } from './support/s3.js';

/** Submit a presigned POST as a browser form would: its fields, then the file (last). */
async function submit(
  post: { url: string; fields: Record<string, string> },
  file: Buffer | string,
  extra: Record<string, string> = {},
  filename = 'upload.bin',
): Promise<Response> {
  const form = new FormData();
  for (const [name, value] of Object.entries({ ...post.fields, ...extra })) form.append(name, value);
  form.append('file', new Blob([typeof file === 'string' ? file : new Uint8Array(file)]), filename);
  return fetch(post.url, { method: 'POST', body: form, redirect: 'manual' });
}

describeWithBucket('e2e: browser form uploads (POST Object with a signed policy)', 'post', (env, bucket) => {
  const presigned = (options: Omit<PresignedPostOptions, 'Bucket'>, client: S3Client = env.s3) =>
    createPresignedPost(client, { Bucket: bucket, Expires: 300, ...options });
  const absent = (key: string) => expectAbsent(env.s3, bucket, key);

  it("stores the file under the form's key with its type and metadata (204 by default, with ETag and Location)", async () => {
    const body = randomBytes(70_000);
    const post = await presigned({ Key: 'forms/a.bin', Fields: { 'Content-Type': 'image/png', 'x-amz-meta-colour': 'blue' } });
    const r = await submit(post, body);
    expect(r.status, await r.clone().text()).to.equal(204);
    expect(r.headers.get('etag')).to.equal(`"${md5Hex(body)}"`);
    expect(r.headers.get('location')).to.equal(`${env.p.endpoint}/${bucket}/forms/a.bin`);
    const got = await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'forms/a.bin' }));
    expect(got.ContentType).to.equal('image/png');
    expect(got.Metadata).to.deep.equal({ colour: 'blue' });
    expect((await bodyBytes(got)).equals(body)).to.equal(true);
  });

  it("keeps the form's tagging field (a Tagging document) as the object's tags; bad tags store nothing", async () => {
    const tagging = '<Tagging><TagSet><Tag><Key>source</Key><Value>form</Value></Tag></TagSet></Tagging>';
    const post = await presigned({ Key: 'forms/tagged.txt', Fields: { tagging } });
    const r = await submit(post, 'tagged');
    expect(r.status, await r.clone().text()).to.equal(204);
    expect((await env.s3.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: 'forms/tagged.txt' }))).TagSet).to.deep.equal([
      { Key: 'source', Value: 'form' },
    ]);
    const bad = await presigned({
      Key: 'forms/bad-tags.txt',
      Fields: { tagging: '<Tagging><TagSet><Tag><Key>aws:x</Key><Value>1</Value></Tag></TagSet></Tagging>' },
    });
    const refused = await submit(bad, 'x');
    expect([refused.status, s3ErrorOf(await refused.text()).code]).to.deep.equal([400, 'InvalidTag']);
    const malformed = await submit(await presigned({ Key: 'forms/bad-xml.txt', Fields: { tagging: '<Tagging><TagSet>' } }), 'x');
    expect([malformed.status, s3ErrorOf(await malformed.text()).code]).to.deep.equal([400, 'MalformedXML']);
    await absent('forms/bad-tags.txt');
    await absent('forms/bad-xml.txt');
  });

  it("holds the policy's key condition for the key ${filename} makes, not for the placeholder", async () => {
    const post = await presigned({ Key: '${filename}', Conditions: [['starts-with', '$key', 'photo']] });
    const r = await submit(post, 'named', {}, 'photo.txt');
    expect(r.status, await r.clone().text()).to.equal(204);
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'photo.txt' })))).toString()).to.equal('named');
    expect((await submit(post, 'other', {}, 'notes.txt')).status).to.equal(403);
    await absent('notes.txt');
  });

  it('fills ${filename} in the key, answers 201 with a PostResponse or 303 to success_action_redirect', async () => {
    const post = await presigned({
      Key: 'uploads/${filename}',
      Conditions: [
        ['starts-with', '$key', 'uploads/'],
        ['starts-with', '$success_action_status', ''],
        ['starts-with', '$success_action_redirect', ''],
      ],
    });
    const created = await submit(post, 'first', { success_action_status: '201' }, 'photo one.txt');
    expect(created.status).to.equal(201);
    const xml = (await created.text()).replaceAll('&quot;', '"');
    expect(xml)
      .to.include('<PostResponse><Location>')
      .and.include('<Key>uploads/photo one.txt</Key>')
      .and.include(`<ETag>"${md5Hex('first')}"</ETag>`);
    expect((await bodyBytes(await env.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'uploads/photo one.txt' })))).toString()).to.equal('first');
    const redirected = await submit(post, 'second', { success_action_redirect: 'https://app.example.com/done?from=form' }, 'b.txt');
    expect(redirected.status).to.equal(303);
    const to = new URL(redirected.headers.get('location')!);
    expect(to.origin + to.pathname).to.equal('https://app.example.com/done');
    expect(Object.fromEntries(to.searchParams)).to.deep.equal({ from: 'form', bucket, key: 'uploads/b.txt', etag: `"${md5Hex('second')}"` });
  });

  it('enforces content-length-range while streaming: too large or too small stores nothing', async () => {
    const post = await presigned({ Key: 'sized.bin', Conditions: [['content-length-range', 10, 1000]] });
    for (const [body, code] of [
      [randomBytes(200_000), 'EntityTooLarge'],
      [Buffer.from('tiny'), 'EntityTooSmall'],
    ] as const) {
      const r = await submit(post, body);
      expect(r.status, code).to.equal(400);
      expect(s3ErrorOf(await r.text()).code).to.equal(code);
      await absent('sized.bin');
    }
    expect((await submit(post, randomBytes(500))).status).to.equal(204);
  });

  it('refuses a changed policy, a changed field, an extra field, an expired policy, another tenant and a malformed form', async () => {
    const post = await presigned({ Key: 'guarded/x.txt', Conditions: [['starts-with', '$key', 'guarded/']] });
    const cases: Array<[string, Promise<Response>, number, string]> = [
      [
        'policy changed',
        submit(
          {
            ...post,
            fields: { ...post.fields, Policy: Buffer.from(JSON.stringify({ expiration: '2099-01-01T00:00:00Z', conditions: [] })).toString('base64') },
          },
          'x',
        ),
        403,
        'SignatureDoesNotMatch',
      ],
      ['key outside the condition', submit({ ...post, fields: { ...post.fields, key: 'elsewhere/x.txt' } }, 'x'), 403, 'AccessDenied'],
      ['extra field', submit(post, 'x', { 'x-amz-meta-unsigned': 'no' }), 403, 'AccessDenied'],
      [
        'no signature',
        submit({ ...post, fields: Object.fromEntries(Object.entries(post.fields).filter(([k]) => k !== 'X-Amz-Signature')) }, 'x'),
        400,
        'InvalidArgument',
      ],
      ['no policy (anonymous)', submit({ url: post.url, fields: { key: 'guarded/x.txt' } }, 'x'), 403, 'AccessDenied'],
    ];
    for (const [what, response, status, code] of cases) {
      const r = await response;
      expect(r.status, what).to.equal(status);
      expect(s3ErrorOf(await r.text()).code, what).to.equal(code);
    }
    const expired = await presigned({ Key: 'guarded/x.txt', Expires: -10 });
    const late = await submit(expired, 'x');
    expect([late.status, s3ErrorOf(await late.text()).message]).to.deep.equal([403, 'Invalid according to Policy: Policy expired.']);
    await absent('guarded/x.txt');

    // Another tenant's keys sign a valid policy, but the bucket is not theirs.
    const otherClient = (await createTenant(env.p.endpoint, 'post-other', 'post-other-password')).s3;
    const foreign = await submit(await presigned({ Key: 'guarded/x.txt' }, otherClient), 'x');
    otherClient.destroy();
    expect([foreign.status, s3ErrorOf(await foreign.text()).code]).to.deep.equal([403, 'AccessDenied']);
    await absent('guarded/x.txt');

    const garbage = await fetch(post.url, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=xyz' }, body: '--xyz\r\nnot a part' });
    expect([garbage.status, s3ErrorOf(await garbage.text()).code]).to.deep.equal([400, 'MalformedPOSTRequest']);
    const bloated = await submit(post, 'x', { 'x-ignore-padding': 'p'.repeat(30 * 1024) });
    expect([bloated.status, s3ErrorOf(await bloated.text()).code]).to.deep.equal([400, 'MaxPostPreDataLengthExceededError']);
    const noFile = new FormData();
    for (const [name, value] of Object.entries(post.fields)) noFile.append(name, value);
    const withoutFile = await fetch(post.url, { method: 'POST', body: noFile });
    expect([withoutFile.status, s3ErrorOf(await withoutFile.text()).code]).to.deep.equal([400, 'InvalidArgument']);
    const notAForm = await fetch(rootPresign(env.p.endpoint, 'POST', `/${bucket}`), { method: 'POST', body: 'x' });
    expect([notAForm.status, s3ErrorOf(await notAForm.text()).code]).to.deep.equal([412, 'PreconditionFailed']);
    await absent('guarded/x.txt');
  });
});
