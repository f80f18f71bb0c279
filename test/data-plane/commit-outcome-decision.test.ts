import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Catalog, CommitOutcomeUnknownError, type CommitRequest } from '../../images/data-plane/src/catalog/catalog.js';
import { FENCE_EVENT } from '../../images/data-plane/src/catalog/commit.js';
import { createPgSqlClient, DatabaseUnavailableError, type SqlClient } from '../../images/service-kit/src/index.js';
import { enc, eventually, startObjectLayer, type ObjectLayer } from './harness.js';

type Lost = 'none' | 'before' | 'after';

/**
 * A PostgreSQL client (of a real server) whose connection fails at chosen moments the way a lost one
 * does (DatabaseUnavailableError): the commit statement before it reaches the server, or after the
 * server ran it (its answer lost); and the statements that decide an unknown outcome.
 */
function losingClient(sql: SqlClient) {
  const faults = { commit: 'none' as Lost, decide: false, lastCommit: undefined as unknown[] | undefined };
  const lost = () => new DatabaseUnavailableError(new Error('Connection terminated unexpectedly'));
  const client: SqlClient = {
    ...sql,
    kind: sql.kind,
    async query<R>(text: string, params?: unknown[]) {
      if (text.includes('strata_commit_objects($1)')) {
        faults.lastCommit = params;
        if (faults.commit === 'before') throw lost();
        if (faults.commit === 'after') {
          await sql.query(text, params);
          throw lost();
        }
      }
      if (faults.decide && text.includes('outbox')) throw lost();
      return sql.query<R>(text, params);
    },
  };
  return { client, faults };
}

describe('data plane: deciding a commit whose answer was lost (PostgreSQL)', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  let lossy: ReturnType<typeof losingClient>;
  let catalog: Catalog;
  let bucket: string;

  before(async () => {
    layer = await startObjectLayer('postgres', {
      inlineBlobBytes: 0,
      dataPlaneSql: (url) => {
        lossy = losingClient(createPgSqlClient(url));
        return lossy.client;
      },
    });
    catalog = new Catalog(lossy.client);
    bucket = `dc-${randomBytes(4).toString('hex')}`;
    expect((await layer.cpFetch('PUT', `/internal/buckets/${bucket}`, { owner: 'alice' })).status).to.equal(200);
  });
  afterEach(() => {
    lossy.faults.commit = 'none';
    lossy.faults.decide = false;
  });
  after(async () => {
    await layer?.stop();
  });

  const request = async (key: string): Promise<CommitRequest> => ({
    bucket: await catalog.bucket(bucket),
    key,
    owner: 'alice',
    blob: { kind: 'new', backendKey: 'test-backend', backend: { kind: 'fs' }, locator: randomBytes(16).toString('hex'), md5: null, size: 3 },
    etag: 'e',
    md5: null,
    size: 3,
    contentType: 'text/plain',
    userMetadata: {},
    now: new Date(),
  });
  const liveObject = async (key: string) =>
    (
      await layer.sql.query("SELECT o.key FROM object_info o JOIN buckets k ON k.id = o.bucket_id WHERE k.name = $1 AND o.key = $2 AND o.state = 'NORMAL'", [
        bucket,
        key,
      ])
    ).rows.length === 1;
  const outcomeOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (err: unknown) => err,
    );

  it('a commit that never reached the server fails as not committed (fenced, the fence never published)', async () => {
    lossy.faults.commit = 'before';
    const err = await outcomeOf(catalog.commitObject(await request('never')));
    expect(err).to.be.instanceOf(DatabaseUnavailableError);
    expect(err).to.not.be.instanceOf(CommitOutcomeUnknownError);
    expect(await liveObject('never')).to.equal(false);
    const fences = await layer.sql.query<{ sent: boolean }>('SELECT sent_at IS NOT NULL AS sent FROM outbox WHERE type = $1', [FENCE_EVENT]);
    expect(fences.rows).to.deep.equal([{ sent: true }]);
  });

  it('a commit the server ran whose answer was lost succeeds', async () => {
    lossy.faults.commit = 'after';
    const result = await catalog.commitObject(await request('ran'));
    expect(result.meta).to.include({ bucket, key: 'ran', size: 3 });
    expect(result.newBlobKept).to.equal(true);
    expect(await liveObject('ran')).to.equal(true);
  });

  it('undecided, it is unknown; decided later, a fenced commit can no longer take place, and asking again answers the same', async () => {
    lossy.faults.commit = 'after';
    lossy.faults.decide = true;
    const ran = await outcomeOf(catalog.commitObject(await request('ran-undecided')));
    expect(ran).to.be.instanceOf(CommitOutcomeUnknownError);
    lossy.faults.commit = 'before';
    const never = await outcomeOf(catalog.commitObject(await request('late')));
    expect(never).to.be.instanceOf(CommitOutcomeUnknownError);
    const late = lossy.faults.lastCommit!;
    lossy.faults.decide = false;
    expect(await catalog.commitOutcome((ran as CommitOutcomeUnknownError).eventId)).to.equal('committed');
    expect(await catalog.commitOutcome((never as CommitOutcomeUnknownError).eventId)).to.equal('not-committed');
    expect(await catalog.commitOutcome((never as CommitOutcomeUnknownError).eventId)).to.equal('not-committed');
    // The statement arrives after all (a frozen server resumes): refused, nothing of it stays.
    const refused = await outcomeOf(layer.sql.query('SELECT * FROM strata_commit_objects($1)', late));
    expect((refused as { code?: string }).code).to.equal('23505');
    expect(await liveObject('late')).to.equal(false);
  });

  it('PUT: bytes of an unknown commit stay until it is decided, then go when it did not take place', async () => {
    lossy.faults.commit = 'before';
    lossy.faults.decide = true;
    const blobFiles = async () => (await layer.files()).filter((f) => f.startsWith('blobs/') && !f.startsWith('blobs/parts/'));
    const before = await blobFiles();
    const res = await layer.dpFetch('PUT', `/internal/objects/${bucket}/${enc('unknown')}`, randomBytes(100_000) as BodyInit, { 'x-strata-owner': 'alice' });
    expect(res.status).to.equal(503);
    expect((await blobFiles()).length).to.equal(before.length + 1);
    lossy.faults.commit = 'none';
    lossy.faults.decide = false;
    await eventually(async () => {
      expect(await blobFiles()).to.deep.equal(before);
    });
    expect((await layer.dpFetch('GET', `/internal/objects/${bucket}/${enc('unknown')}`)).status).to.equal(404);
  });
});
