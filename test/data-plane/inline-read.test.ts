import { expect } from 'chai';
import { Catalog } from '../../images/data-plane/src/catalog/catalog.js';
import type { SqlClient } from '../../images/service-kit/src/index.js';

/**
 * A GET that misses the caches reads an inline object in one statement: objectByBucketName brings
 * the blob's bytes with the row, and the inlineBlob call of the same GET takes them without a
 * second round trip (on embedded PGlite, a hop to its thread and back).
 */
describe('data plane catalog: inline bytes read with their row', () => {
  const row = (locator: string, data: Buffer | null) => ({
    bucket_id: 7,
    bucket_owner: 'alice',
    bucket_backend: { kind: 'fs' },
    key: 'k',
    size: data?.length ?? 5000,
    etag: 'e',
    md5: 'e',
    content_type: 'application/octet-stream',
    user_metadata: {},
    last_modified: new Date('2026-12-05T10:00:00Z'),
    tags: null,
    headers: null,
    part_sizes: null,
    part_checksums: null,
    owner: 'alice',
    blob_id: 3,
    locator,
    backend_key: 'fs',
    inline_data: data,
  });

  function catalogOver(rows: Record<string, ReturnType<typeof row>>, stored: Record<string, Buffer>) {
    const statements: string[] = [];
    const sql = {
      query: async (text: string, params: unknown[] = []) => {
        statements.push(text.includes('FROM blobs WHERE') ? 'inlineBlob' : 'objectByBucketName');
        if (text.includes('FROM blobs WHERE')) {
          const data = stored[`${params[0] as string}/${params[1] as string}`];
          return { rows: data ? [{ data }] : [], rowCount: data ? 1 : 0 };
        }
        const r = rows[params[1] as string];
        return { rows: r ? [r] : [], rowCount: r ? 1 : 0 };
      },
    } as unknown as SqlClient;
    return { catalog: new Catalog(sql), statements };
  }

  it('answers the GET after the row from the bytes read with it, once; a file blob and a later read ask the database', async () => {
    const bytes = Buffer.from('inline bytes');
    const locator = `i${'a'.repeat(32)}`;
    const { catalog, statements } = catalogOver({ k: row(locator, bytes), f: row('0123', null) }, { [`fs/${locator}`]: bytes });
    const { object } = await catalog.objectByBucketName('b', 'k');
    expect(object?.locator).to.equal(locator);
    expect(object).to.not.have.property('inline_data');
    expect(await catalog.inlineBlob('fs', locator)).to.deep.equal(bytes);
    expect(statements).to.deep.equal(['objectByBucketName']);
    // Taken once: the next read of the blob asks the database again.
    expect(await catalog.inlineBlob('fs', locator)).to.deep.equal(bytes);
    expect(statements).to.deep.equal(['objectByBucketName', 'inlineBlob']);
    // Another backend's blob of that locator is not these bytes (the database is asked: a stale read, then a fresh one).
    await catalog.objectByBucketName('b', 'k');
    expect(await catalog.inlineBlob('other', locator)).to.equal(undefined);
    expect(statements.filter((s) => s === 'inlineBlob').length).to.equal(3);
    // A file blob's row brings no bytes.
    await catalog.objectByBucketName('b', 'f');
    expect(await catalog.inlineBlob('fs', '0123')).to.equal(undefined);
    expect(statements.filter((s) => s === 'inlineBlob').length).to.equal(5);
  });

  it('keeps at most 64 rows of bytes nobody took (HEADs, copies)', async () => {
    const rows: Record<string, ReturnType<typeof row>> = {};
    for (let i = 0; i < 70; i++) rows[`k${i}`] = row(`i${String(i).padStart(32, '0')}`, Buffer.from(`bytes ${i}`));
    const { catalog, statements } = catalogOver(rows, {});
    for (let i = 0; i < 70; i++) await catalog.objectByBucketName('b', `k${i}`);
    expect(await catalog.inlineBlob('fs', `i${String(69).padStart(32, '0')}`)).to.deep.equal(Buffer.from('bytes 69'));
    expect(await catalog.inlineBlob('fs', `i${String(0).padStart(32, '0')}`)).to.equal(undefined);
    expect(statements.filter((s) => s === 'inlineBlob').length).to.equal(2);
  });
});
