// Data written by the previous release opens under this build and is read back whole: the fixtures in
// fixtures/ were made by 0.1.0 (fixtures/README.md says how), one on the embedded defaults (its data dir:
// PGlite cluster, blob files, secrets) and one on PostgreSQL (a pg_dump and the data dir's files).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import {
  CreateBucketCommand,
  GetBucketOwnershipControlsCommand,
  GetBucketTaggingCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import type { FixtureManifest } from '../../hack/upgrade-fixture.js';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient, createPgSqlClient, productionSettings, type SqlClient } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { startTestPlatform, type TestPlatform } from '../e2e/support/platform.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { schemaCatalog } from '../support/schema-catalog.js';
import { filesUnder } from '../support/temp-dir.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

async function freshCatalog(sql: SqlClient): Promise<string[]> {
  try {
    await migrate(sql);
    return await schemaCatalog(sql);
  } finally {
    await sql.close();
  }
}

for (const name of ['0.1.0-embedded', '0.1.0-postgres']) {
  describe(`upgrade: the data of ${name} opens under this build, every byte kept`, function () {
    this.timeout(300_000);
    const manifest = JSON.parse(readFileSync(path.join(FIXTURES, name, 'manifest.json'), 'utf8')) as FixtureManifest;
    let dataDir: string;
    let db: TestDatabase | undefined;
    let platform: TestPlatform;
    let secretsBefore: Record<string, string>;
    const client = (accessKeyId: string, secretAccessKey: string) =>
      new S3Client({ endpoint: platform.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
    let root: S3Client;
    let alice: S3Client;
    const ownerClient = (bucket: string) => (manifest.buckets.find((b) => b.name === bucket)?.owner === manifest.user.username ? alice : root);
    const login = async (username: string, password: string) => {
      const res = await fetch(`${platform.endpoint}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password }),
      });
      expect(res.status, `login of ${username}`).to.equal(200);
      return ((await res.json()) as { data: { token: string } }).data.token;
    };
    const readSecrets = () => Object.fromEntries(['jwt-secret', 'server-key'].map((f) => [f, readFileSync(path.join(dataDir, 'secrets', f), 'utf8')]));

    before(async () => {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'strata-upgrade-'));
      execFileSync('tar', ['-xzf', path.join(FIXTURES, name, 'data-dir.tar.gz'), '-C', dataDir]);
      secretsBefore = readSecrets();
      let production: ReturnType<typeof productionSettings> | undefined;
      if (manifest.database === 'postgres') {
        db = await createTestDatabase('strata_upgrade');
        const sql = createPgSqlClient(db.url);
        try {
          await sql.exec(gunzipSync(readFileSync(path.join(FIXTURES, name, 'database.sql.gz'))).toString('utf8'));
        } finally {
          await sql.close();
        }
        production = productionSettings(loadStandaloneEnv({ STRATA_PG_URL: db.url }));
      }
      // The files as old as a week-old install's, so that the data plane's sweep of blob files no row
      // names (past its grace) judges every one of them at start.
      const weekAgo = new Date(Date.now() - 7 * 24 * 3600_000);
      for (const file of await filesUnder(dataDir)) await utimes(path.join(dataDir, file), weekAgo, weekAgo);
      // Secrets come from the data dir (as `npm start` without STRATA_JWT_SECRET / STRATA_SECRET_KEY).
      const start = () => startTestPlatform(dataDir, { generatedJwtSecret: true, rootPassword: manifest.root.password, production });
      // Stopping waits for the sweep the first start began; the second start migrates nothing.
      await (await start()).stop();
      platform = await start();
      root = client(manifest.root.username, manifest.root.password);
      alice = client(manifest.user.accessKey, manifest.user.secretKey);
    });

    after(async () => {
      root?.destroy();
      alice?.destroy();
      await platform?.stop();
      await db?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('keeps the secrets of the data dir and the users: root and the user log in, the user’s SigV4 keys still sign', async () => {
      expect(readSecrets()).to.deep.equal(secretsBefore);
      await login(manifest.root.username, manifest.root.password);
      await login(manifest.user.username, manifest.user.password);
      const own = await alice.send(new ListBucketsCommand({}));
      expect(own.Buckets?.map((b) => b.Name)).to.deep.equal(manifest.buckets.filter((b) => b.owner === manifest.user.username).map((b) => b.name));
    });

    it('gives the earlier users no e-mail address (migration 0009) until the root gives one, which a grant by e-mail then names', async () => {
      const token = await login(manifest.root.username, manifest.root.password);
      const patched = await fetch(`${platform.endpoint}/admin/users/${manifest.user.username}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'Upgraded@Example.com' }),
      });
      expect([patched.status, await patched.json()]).to.deep.equal([200, { data: { username: manifest.user.username, email: 'Upgraded@Example.com' } }]);
      const bucket = `upgrade-mail-${name.replace(/[^a-z0-9]/g, '')}`;
      await root.send(new CreateBucketCommand({ Bucket: bucket, ObjectOwnership: 'ObjectWriter' }));
      await root.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'granted', GrantRead: 'emailAddress="upgraded@example.com"' }));
      expect((await root.send(new GetObjectAclCommand({ Bucket: bucket, Key: 'k' }))).Grants?.map((g) => g.Grantee?.ID)).to.deep.equal([
        manifest.user.username,
      ]);
      expect(await (await alice.send(new GetObjectCommand({ Bucket: bucket, Key: 'k' }))).Body!.transformToString()).to.equal('granted');
    });

    it('lists every bucket and object, and keeps the buckets’ tags', async () => {
      for (const bucket of manifest.buckets) {
        const listed = await ownerClient(bucket.name).send(new ListObjectsV2Command({ Bucket: bucket.name }));
        const keys = manifest.objects.filter((o) => o.bucket === bucket.name).map((o) => o.key);
        expect(
          (listed.Contents ?? []).map((o) => o.Key),
          bucket.name,
        ).to.deep.equal(keys.sort());
        if (bucket.tags) expect((await root.send(new GetBucketTaggingCommand({ Bucket: bucket.name }))).TagSet).to.deep.equal(bucket.tags);
      }
    });

    it('gives every earlier bucket ACLs off (BucketOwnerEnforced): its objects stay private to its owner', async () => {
      for (const bucket of manifest.buckets) {
        const controls = await ownerClient(bucket.name).send(new GetBucketOwnershipControlsCommand({ Bucket: bucket.name }));
        expect(controls.OwnershipControls?.Rules, bucket.name).to.deep.equal([{ ObjectOwnership: 'BucketOwnerEnforced' }]);
      }
      for (const o of manifest.objects) {
        const anonymous = await fetch(`${platform.endpoint}/${o.bucket}/${encodeURIComponent(o.key).replace(/%2F/g, '/')}`);
        expect(anonymous.status, o.key).to.equal(403);
      }
    });

    it('reads every object back byte for byte, with its ETag, content type, metadata, headers and tags', async () => {
      for (const o of manifest.objects) {
        const s3 = ownerClient(o.bucket);
        const got = await s3.send(new GetObjectCommand({ Bucket: o.bucket, Key: o.key }));
        const body = await got.Body!.transformToByteArray();
        expect({ key: o.key, size: body.length, sha256: sha256(body) }).to.deep.equal({ key: o.key, size: o.size, sha256: o.sha256 });
        expect([got.ETag, got.ContentType, got.Metadata, got.CacheControl], o.key).to.deep.equal([o.etag, o.contentType, o.metadata, o.cacheControl]);
        const tags = await s3.send(new GetObjectTaggingCommand({ Bucket: o.bucket, Key: o.key }));
        expect(tags.TagSet, o.key).to.deep.equal(o.tags);
      }
    });

    it('answers the multipart object’s parts', async () => {
      const o = manifest.objects.find((x) => x.parts)!;
      for (const [i, size] of o.parts!.entries()) {
        const head = await root.send(new HeadObjectCommand({ Bucket: o.bucket, Key: o.key, PartNumber: i + 1 }));
        expect([head.PartsCount, head.ContentLength], `part ${i + 1}`).to.deep.equal([o.parts!.length, size]);
      }
    });

    it('deduplicates a new upload onto the instant pair’s blob, and stores new objects beside the old', async () => {
      const [first] = manifest.instantPair.keys;
      const old = manifest.objects.find((o) => o.bucket === manifest.instantPair.bucket && o.key === first)!;
      const bytes = await (await root.send(new GetObjectCommand({ Bucket: old.bucket, Key: old.key }))).Body!.transformToByteArray();
      const md5 = createHash('md5').update(bytes).digest('hex');
      const token = await login(manifest.root.username, manifest.root.password);
      const res = await fetch(`${platform.endpoint}/${old.bucket}/dup/after-upgrade.bin`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'x-service-md5': md5 },
        body: new Uint8Array(bytes),
      });
      expect(res.status).to.equal(200);
      expect(((await res.json()) as { data: { instant: boolean } }).data.instant).to.equal(true);
      for (const [key, body] of [
        ['dup/after-upgrade.bin', Buffer.from(bytes)],
        ['new/inline.txt', Buffer.from('written after the upgrade')],
        ['new/file.bin', Buffer.alloc(200_000, 7)],
      ] as const) {
        if (!key.startsWith('dup/')) await root.send(new PutObjectCommand({ Bucket: old.bucket, Key: key, Body: body }));
        const back = await (await root.send(new GetObjectCommand({ Bucket: old.bucket, Key: key }))).Body!.transformToByteArray();
        expect(sha256(back), key).to.equal(sha256(body));
      }
    });

    it('keeps the recycle bin: each soft-deleted object is listed and restores byte for byte', async () => {
      const token = await login(manifest.root.username, manifest.root.password);
      const auth = { authorization: `Bearer ${token}` };
      const bin = await fetch(`${platform.endpoint}/admin/recycle-bin?bucket=${manifest.recycled[0]!.bucket}`, { headers: auth });
      const objects = ((await bin.json()) as { data: { objects: Array<{ id: string; key: string; size: number }> } }).data.objects;
      expect(objects.map((o) => [o.key, o.size]).sort()).to.deep.equal(manifest.recycled.map((r) => [r.key, r.size]).sort());
      for (const r of manifest.recycled) {
        const entry = objects.find((o) => o.key === r.key)!;
        const restored = await fetch(`${platform.endpoint}/admin/recycle-bin/${entry.id}/restore`, { method: 'POST', headers: auth });
        expect(restored.status, r.key).to.equal(200);
        const body = await (await root.send(new GetObjectCommand({ Bucket: r.bucket, Key: r.key }))).Body!.transformToByteArray();
        expect(sha256(body), r.key).to.equal(r.sha256);
      }
    });

    it('leaves the schema equal to a fresh database’s', async () => {
      await platform.stop();
      if (db) {
        const sql = createPgSqlClient(db.url);
        try {
          const fresh = await createTestDatabase('strata_upgrade_fresh');
          try {
            expect(await schemaCatalog(sql)).to.deep.equal(await freshCatalog(createPgSqlClient(fresh.url)));
          } finally {
            await fresh.drop();
          }
        } finally {
          await sql.close();
        }
      } else {
        const sql = await createPgliteSqlClient(path.join(dataDir, 'pglite'));
        try {
          expect(await schemaCatalog(sql)).to.deep.equal(await freshCatalog(await createPgliteSqlClient()));
        } finally {
          await sql.close();
        }
      }
    });
  });
}
