import {
  DeleteObjectsCommand,
  GetBucketLifecycleConfigurationCommand,
  GetBucketTaggingCommand,
  GetObjectTaggingCommand,
  ListObjectsV2Command,
  PutBucketLifecycleConfigurationCommand,
  PutBucketTaggingCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { rawRequest } from '../support/http.js';
import { bearer, describeWithBucket, s3ErrorOf, uploadInParts } from './support/s3.js';

/** Keys whose spaces are part of them. */
const SPACED_KEYS = ['sp ', ' lead', ' ', '  two  '];

describeWithBucket('e2e: XML text in request bodies is kept byte for byte', 'xmltext', (env, bucket) => {
  const keys = async () => ((await env.s3.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key);

  it('DeleteObjects deletes keys with leading, trailing and only spaces, and reports exactly those', async () => {
    for (const Key of [...SPACED_KEYS, 'sp', 'lead', 'keep']) await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }));
    const out = await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: SPACED_KEYS.map((Key) => ({ Key })) } }));
    expect(out.Errors ?? []).to.deep.equal([]);
    expect((out.Deleted ?? []).map((d) => d.Key).sort()).to.deep.equal([...SPACED_KEYS].sort());
    // The trimmed look-alikes stay; the spaced keys are gone.
    expect((await keys()).sort()).to.deep.equal(['keep', 'lead', 'sp']);
    await env.s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: ['keep', 'lead', 'sp'].map((Key) => ({ Key })) } }));
  });

  it('object and bucket tags keep the spaces around their keys and values', async () => {
    const TagSet = [
      { Key: ' k', Value: 'v ' },
      { Key: 'k2 ', Value: ' ' },
      { Key: 'plain', Value: '' },
    ];
    await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'tagged', Body: 'x' }));
    await env.s3.send(new PutObjectTaggingCommand({ Bucket: bucket, Key: 'tagged', Tagging: { TagSet } }));
    const objectTags = (await env.s3.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: 'tagged' }))).TagSet;
    expect(objectTags).to.have.deep.members(TagSet);
    await env.s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet } }));
    expect((await env.s3.send(new GetBucketTaggingCommand({ Bucket: bucket }))).TagSet).to.have.deep.members(TagSet);
  });

  it("a lifecycle rule's prefix and ID keep their spaces", async () => {
    await env.s3.send(
      new PutBucketLifecycleConfigurationCommand({
        Bucket: bucket,
        LifecycleConfiguration: { Rules: [{ ID: ' spaced id ', Status: 'Enabled', Filter: { Prefix: 'logs/ ' }, Expiration: { Days: 3 } }] },
      }),
    );
    const rules = (await env.s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }))).Rules ?? [];
    expect(rules.map((r) => [r.ID, r.Filter?.Prefix])).to.deep.equal([[' spaced id ', 'logs/ ']]);
  });

  it('CompleteMultipartUpload of a key with spaces, and indentation between elements, work as before', async () => {
    await uploadInParts(env.s3, bucket, ' mp key ', ['part one']);
    expect(await keys()).to.include(' mp key ');
    const auth = bearer(env.token);
    const indented = `<?xml version="1.0" encoding="UTF-8"?>\n<Delete>\n  <Object>\n    <Key> mp key </Key>\n  </Object>\n  <Quiet>true</Quiet>\n</Delete>\n`;
    const r = await rawRequest(env.p.endpoint, 'POST', `/${bucket}?delete`, auth, indented);
    expect(r.status, r.body).to.equal(200);
    expect(r.body).to.not.contain('<Error>');
    expect(await keys()).to.not.include(' mp key ');
  });

  it('character references are decoded: &#x20; is a space, &amp;#32; the text "&#32;"', async () => {
    for (const Key of ['ref ', 'ref&#32;', 'ref']) await env.s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }));
    const doc = '<Delete><Object><Key>ref&#x20;</Key></Object><Object><Key>ref&amp;#32;</Key></Object><Quiet>true</Quiet></Delete>';
    const r = await rawRequest(env.p.endpoint, 'POST', `/${bucket}?delete`, bearer(env.token), doc);
    expect(r.status, r.body).to.equal(200);
    const left = await keys();
    expect(left).to.include('ref');
    expect(left).to.not.include('ref ');
    expect(left).to.not.include('ref&#32;');
  });

  it('an entity XML does not define, or a reference to a character XML does not allow, is MalformedXML', async () => {
    const auth = bearer(env.token);
    for (const key of ['a&nbsp;b', 'a&#0;b', 'a & b']) {
      const r = await rawRequest(env.p.endpoint, 'POST', `/${bucket}?delete`, auth, `<Delete><Object><Key>${key}</Key></Object></Delete>`);
      expect([r.status, s3ErrorOf(r.body).code], key).to.deep.equal([400, 'MalformedXML']);
    }
  });
});
