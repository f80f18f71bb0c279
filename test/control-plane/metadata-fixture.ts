import { expect } from 'chai';
import { enc, startObjectLayer, type DbKind, type ObjectLayer } from '../data-plane/harness.js';

export interface ListPage {
  objects: Array<{ key: string }>;
  commonPrefixes: string[];
  isTruncated: boolean;
  nextContinuationToken?: string;
  nextMarker?: string;
}

/**
 * The object layer of a control-plane metadata suite on `kind`, started before the calling suite and
 * stopped after, with the helpers its tests share. Bodies are in files: purge tests check that freed
 * bytes leave the disk (inline blobs: test/data-plane/objects.test.ts). Call inside `describe`.
 */
export function metadataSuite(kind: DbKind) {
  let layer: ObjectLayer;
  let seq = 0;
  const owner = 'alice';

  before(async () => {
    layer = await startObjectLayer(kind, { inlineBlobBytes: 0 });
  });
  after(async () => {
    await layer?.stop();
  });

  const newBucket = async (): Promise<string> => {
    const name = `bkt-${kind}-${++seq}`;
    const res = await layer.cpFetch('PUT', `/internal/buckets/${name}`, { owner });
    expect(res.status, await res.clone().text()).to.equal(200);
    return name;
  };
  const put = async (bucket: string, key: string, body: string, who = owner) => {
    const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc(key)}`, body, { 'x-strata-owner': who, 'content-type': 'text/plain' });
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as { object: { etag: string; size: number }; instant: boolean };
  };
  const list = async (bucket: string, query: Record<string, string>): Promise<ListPage> => {
    const res = await layer.cpFetch('GET', `/internal/buckets/${bucket}/objects?${new URLSearchParams(query)}`);
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as ListPage;
  };
  const errorOf = async (res: Response) => ({ status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code });

  return {
    get layer(): ObjectLayer {
      return layer;
    },
    owner,
    newBucket,
    put,
    list,
    errorOf,
  };
}
