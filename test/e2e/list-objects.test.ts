import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { bearer, describeWithBucket, s3ErrorOf } from './support/s3.js';

/** Every ListObjects parameter clients use, checked on the wire (the raw XML for encoding-type=url). */
describeWithBucket('e2e: ListObjects on the wire (encoding-type, fetch-owner, max-keys, delimiter pages)', 'listing', (env, b) => {
  const list = async (query: string) => {
    const r = await fetch(`${env.p.endpoint}/${b}?${query}`, { headers: bearer(env.token) });
    return { status: r.status, xml: await r.text() };
  };
  const tags = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, 'g'))].map((m) => m[1]);

  before(async () => {
    for (const Key of ['a/1', 'a/2', 'a/b/3', 'B', 'c d/+4', 'c d/e&f', 'z', 'é']) await env.s3.send(new PutObjectCommand({ Bucket: b, Key, Body: Key }));
  });

  it('encoding-type=url encodes keys, prefixes, delimiter and start-after in the XML itself', async () => {
    const v2 = await list('list-type=2&encoding-type=url&prefix=c%20d%2F');
    expect(v2.status).to.equal(200);
    expect(tags(v2.xml, 'Key')).to.deep.equal(['c%20d/%2B4', 'c%20d/e%26f']);
    expect(tags(v2.xml, 'Prefix')).to.deep.equal(['c%20d/']);
    expect(tags(v2.xml, 'EncodingType')).to.deep.equal(['url']);
    const grouped = await list('list-type=2&encoding-type=url&delimiter=%2F&start-after=B');
    // Byte order: 'B' < 'a/...' < 'c d/...' < 'z' < 'é'.
    expect(tags(grouped.xml, 'Prefix')).to.deep.equal(['', 'a/', 'c%20d/']);
    expect(tags(grouped.xml, 'StartAfter')).to.deep.equal(['B']);
    expect(tags(grouped.xml, 'Key')).to.deep.equal(['z', '%C3%A9']);
    // Without encoding-type the same keys come back as they are (XML-escaped only).
    const plain = await list('list-type=2&prefix=c%20d%2F');
    expect(tags(plain.xml, 'Key')).to.deep.equal(['c d/+4', 'c d/e&amp;f']);
    expect(plain.xml).not.to.contain('<EncodingType>');
    const v1 = await list('encoding-type=url&prefix=c%20d%2F');
    expect(tags(v1.xml, 'Key')).to.deep.equal(['c%20d/%2B4', 'c%20d/e%26f']);
  });

  it('fetch-owner adds Owner only when asked; max-keys 0, bad max-keys, bad encoding and unknown tokens', async () => {
    expect((await list('list-type=2&prefix=a%2F')).xml).not.to.contain('<Owner>');
    const owned = await list('list-type=2&prefix=a%2F&fetch-owner=true');
    expect(tags(owned.xml, 'ID')).to.deep.equal(['strata', 'strata', 'strata']);
    const none = await list('list-type=2&max-keys=0');
    expect(none.status).to.equal(200);
    expect(tags(none.xml, 'KeyCount')).to.deep.equal(['0']);
    expect(none.xml).not.to.contain('<Contents>');
    const over = await list('list-type=2&max-keys=5000');
    expect(tags(over.xml, 'MaxKeys')).to.deep.equal(['1000']);
    expect(tags(over.xml, 'Key')).to.have.length(8);
    for (const bad of [
      'list-type=2&max-keys=abc',
      'list-type=2&max-keys=-1',
      'list-type=2&encoding-type=base64',
      'list-type=2&continuation-token=not-a-token',
    ]) {
      const r = await list(bad);
      expect(r.status, bad).to.equal(400);
      expect(s3ErrorOf(r.xml).code, bad).to.equal('InvalidArgument');
    }
  });

  it('v2 pages with delimiter: common prefixes count toward max-keys and are never repeated', async () => {
    const seenKeys: string[] = [];
    const seenPrefixes: string[] = [];
    let token: string | undefined;
    do {
      const page = await env.s3.send(new ListObjectsV2Command({ Bucket: b, Delimiter: '/', MaxKeys: 1, ContinuationToken: token }));
      expect((page.Contents ?? []).length + (page.CommonPrefixes ?? []).length).to.be.at.most(1);
      expect(page.KeyCount).to.equal((page.Contents ?? []).length + (page.CommonPrefixes ?? []).length);
      seenKeys.push(...(page.Contents ?? []).map((o) => o.Key!));
      seenPrefixes.push(...(page.CommonPrefixes ?? []).map((c) => c.Prefix!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    expect(seenPrefixes).to.deep.equal(['a/', 'c d/']);
    expect(seenKeys).to.deep.equal(['B', 'z', 'é']);
  });

  it('v1 with a delimiter answers NextMarker and pages over common prefixes', async () => {
    const first = await list('delimiter=%2F&max-keys=2');
    expect(tags(first.xml, 'IsTruncated')).to.deep.equal(['true']);
    expect(tags(first.xml, 'Key')).to.deep.equal(['B']);
    expect(tags(first.xml, 'Prefix').slice(1)).to.deep.equal(['a/']);
    expect(tags(first.xml, 'NextMarker')).to.deep.equal(['a/']);
    // A marker that is a common prefix skips everything under it.
    const second = await list('delimiter=%2F&max-keys=2&marker=a%2F');
    expect(tags(second.xml, 'Prefix').slice(1)).to.deep.equal(['c d/']);
    expect(tags(second.xml, 'Key')).to.deep.equal(['z']);
    expect(tags(second.xml, 'NextMarker')).to.deep.equal(['z']);
    const third = await list('delimiter=%2F&max-keys=2&marker=z');
    expect(tags(third.xml, 'Key')).to.deep.equal(['é']);
    expect(tags(third.xml, 'IsTruncated')).to.deep.equal(['false']);
    expect(third.xml).not.to.contain('<NextMarker>');
  });
});
