// Makes an upgrade fixture with an older Strata: `npm start` of that build in a worktree, on a new data
// dir (and, with --pg-url, a new PostgreSQL database), written through the S3 API and the admin API,
// stopped, and packed into test/upgrade/fixtures/<name>/ with a manifest of what it holds. The upgrade
// test (test/upgrade/upgrade.test.ts) starts today's build on it and reads everything back.
//
//   git worktree add /work/old-0.1.0 fc16469 && ln -s "$PWD/node_modules" /work/old-0.1.0/node_modules
//   npx tsx hack/upgrade-fixture.ts --old /work/old-0.1.0 --name 0.1.0-embedded
//   createdb -h 127.0.0.1 -U postgres strata_fixture
//   npx tsx hack/upgrade-fixture.ts --old /work/old-0.1.0 --name 0.1.0-postgres \
//     --pg-url postgresql://postgres@127.0.0.1:5432/strata_fixture
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  PutBucketTaggingCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { freePorts, waitForPort } from '../test/support/ports.js';

export const FIXTURE_ROOT_USER = 'strata';
export const FIXTURE_ROOT_PASSWORD = 'upgrade-fixture-root-password';

/** What a fixture holds, as the build that wrote it answered; the upgrade test reads it all back. */
export interface FixtureManifest {
  madeBy: { version: string; commit: string };
  database: 'embedded' | 'postgres';
  root: { username: string; password: string };
  user: { username: string; password: string; accessKey: string; secretKey: string };
  buckets: Array<{ name: string; owner: string; tags?: Array<{ Key: string; Value: string }> }>;
  objects: Array<{
    bucket: string;
    key: string;
    size: number;
    sha256: string;
    etag: string;
    contentType: string;
    metadata: Record<string, string>;
    tags: Array<{ Key: string; Value: string }>;
    cacheControl?: string;
    parts?: number[];
  }>;
  /** Objects deleted into the recycle bin (their bytes as when written). */
  recycled: Array<{ bucket: string; key: string; size: number; sha256: string }>;
  /** Keys written with x-service-md5 whose second upload was an instant hit (one blob). */
  instantPair: { bucket: string; keys: [string, string] };
}

/** Bodies that compress well (the fixture stays small) yet differ in every block. */
export function fixtureBody(label: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let off = 0;
  for (let block = 0; off < size; block++) {
    const line = `${label} block ${block} `.padEnd(64, '.') + '\n';
    off += out.write(line.repeat(16), off);
  }
  return out;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { old: { type: 'string' }, name: { type: 'string' }, 'pg-url': { type: 'string' }, out: { type: 'string' } },
  });
  if (!values.old || !values.name) throw new Error('usage: --old <worktree of the older build> --name <fixture name> [--pg-url URL]');
  const oldDir = path.resolve(values.old);
  const out = path.resolve(values.out ?? path.join('test/upgrade/fixtures', values.name));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'strata-upgrade-fixture-'));
  const [gateway, dataPlane, controlPlane] = await freePorts(3);
  const version = (JSON.parse(execFileSync('git', ['-C', oldDir, 'show', 'HEAD:package.json'], { encoding: 'utf8' })) as { version: string }).version;
  const commit = execFileSync('git', ['-C', oldDir, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();

  const child = spawn(path.join(oldDir, 'node_modules/.bin/tsx'), ['images/standalone/src/main.ts'], {
    cwd: oldDir,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      STRATA_DATA_DIR: dataDir,
      STRATA_HOST: '127.0.0.1',
      STRATA_GATEWAY_PORT: String(gateway),
      STRATA_DATA_PLANE_PORT: String(dataPlane),
      STRATA_CONTROL_PLANE_PORT: String(controlPlane),
      STRATA_DISABLED_SERVICES: 'model-server,poem-app,image-search',
      STRATA_ROOT_USER: FIXTURE_ROOT_USER,
      STRATA_ROOT_PASSWORD: FIXTURE_ROOT_PASSWORD,
      STRATA_PURGE_SCHEDULE: 'off',
      LOG_LEVEL: 'warn',
      ...(values['pg-url'] ? { STRATA_PG_URL: values['pg-url'] } : {}),
    },
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await waitForPort(gateway!, '127.0.0.1', 120_000);
    const endpoint = `http://127.0.0.1:${gateway}`;
    for (;;) {
      const ready = await fetch(`${endpoint}/readyz`).catch(() => undefined);
      if (ready?.ok) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const manifest = await writeData(endpoint, values['pg-url'] ? 'postgres' : 'embedded', { version, commit });
    child.kill('SIGTERM');
    if ((await exited) !== 0) throw new Error('the older build did not stop cleanly');

    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
    execFileSync('tar', ['-czf', path.join(out, 'data-dir.tar.gz'), '--sort=name', '-C', dataDir, '.']);
    if (values['pg-url']) {
      // Plain INSERTs (no COPY from stdin): any client runs the dump as one script.
      // psql's meta-commands (\restrict, \unrestrict of newer pg_dumps) are left out: no client but psql runs them.
      const dump = execFileSync('pg_dump', ['--inserts', '--no-owner', '--no-privileges', values['pg-url']], { encoding: 'utf8', maxBuffer: 1 << 28 })
        .split('\n')
        .filter((line) => !/^\\(un)?restrict /.test(line))
        .join('\n');
      writeFileSync(path.join(out, 'database.sql.gz'), execFileSync('gzip', ['-9n'], { input: dump }));
    }
    process.stderr.write(`fixture written to ${out}\n`);
  } finally {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function writeData(endpoint: string, database: FixtureManifest['database'], madeBy: FixtureManifest['madeBy']): Promise<FixtureManifest> {
  const json = async (method: string, url: string, body: unknown, token?: string) => {
    const res = await fetch(endpoint + url, {
      method,
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return (JSON.parse(text) as { data: Record<string, string> }).data;
  };
  const rootToken = (await json('POST', '/login', { username: FIXTURE_ROOT_USER, password: FIXTURE_ROOT_PASSWORD })).token!;
  const created = await json('POST', '/admin/users', { username: 'alice', password: 'alice-fixture-password' }, rootToken);
  const user = { username: 'alice', password: 'alice-fixture-password', accessKey: created.accessKey!, secretKey: created.secretKey! };
  const s3 = (accessKeyId: string, secretAccessKey: string) =>
    new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
  const root = s3(FIXTURE_ROOT_USER, FIXTURE_ROOT_PASSWORD);
  const alice = s3(user.accessKey, user.secretKey);

  const manifest: FixtureManifest = {
    madeBy,
    database,
    root: { username: FIXTURE_ROOT_USER, password: FIXTURE_ROOT_PASSWORD },
    user,
    buckets: [],
    objects: [],
    recycled: [],
    instantPair: { bucket: 'beta', keys: ['dup/a.bin', 'dup/b.bin'] },
  };
  const bucketTags = [{ Key: 'team', Value: 'storage' }];
  for (const [name, client, owner] of [
    ['alpha', root, FIXTURE_ROOT_USER],
    ['beta', root, FIXTURE_ROOT_USER],
    ['alice-files', alice, 'alice'],
  ] as const) {
    await client.send(new CreateBucketCommand({ Bucket: name }));
    manifest.buckets.push({ name, owner });
  }
  await root.send(new PutBucketTaggingCommand({ Bucket: 'alpha', Tagging: { TagSet: bucketTags } }));
  manifest.buckets[0]!.tags = bucketTags;

  const put = async (
    client: S3Client,
    bucket: string,
    key: string,
    body: Buffer,
    extra: { metadata?: Record<string, string>; tags?: Array<{ Key: string; Value: string }>; cacheControl?: string; contentType?: string } = {},
  ) => {
    const tags = extra.tags ?? [];
    const res = await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ContentType: extra.contentType ?? 'application/octet-stream',
        Metadata: extra.metadata,
        CacheControl: extra.cacheControl,
        Tagging: tags.length ? tags.map((t) => `${encodeURIComponent(t.Key)}=${encodeURIComponent(t.Value)}`).join('&') : undefined,
      }),
    );
    return {
      bucket,
      key,
      size: body.length,
      sha256: sha256(body),
      etag: res.ETag!,
      contentType: extra.contentType ?? 'application/octet-stream',
      metadata: extra.metadata ?? {},
      tags,
      ...(extra.cacheControl ? { cacheControl: extra.cacheControl } : {}),
    };
  };

  // Small bodies are inline (in the blob's database row), larger ones files under the data dir.
  manifest.objects.push(
    await put(root, 'alpha', 'small/inline.txt', fixtureBody('inline', 1000), {
      contentType: 'text/plain',
      metadata: { colour: 'blue' },
      tags: [{ Key: 'kind', Value: 'inline' }],
      cacheControl: 'max-age=60',
    }),
  );
  manifest.objects.push(
    await put(root, 'alpha', 'large/file.bin', fixtureBody('file', 300_000), {
      metadata: { origin: 'fixture' },
      tags: [
        { Key: 'kind', Value: 'file' },
        { Key: 'size', Value: 'large' },
      ],
    }),
  );
  manifest.objects.push(await put(alice, 'alice-files', 'notes/alice.txt', fixtureBody('alice', 2000), { contentType: 'text/plain' }));

  // A multipart object of two parts (the first at S3's 5 MiB minimum).
  const partBodies = [fixtureBody('part 1', 5 * 1024 * 1024), fixtureBody('part 2', 70_000)];
  const mpKey = 'multipart/object.bin';
  const { UploadId } = await root.send(
    new CreateMultipartUploadCommand({ Bucket: 'alpha', Key: mpKey, ContentType: 'application/x-fixture', Metadata: { parts: '2' } }),
  );
  const parts = [];
  for (const [i, body] of partBodies.entries()) {
    const { ETag } = await root.send(new UploadPartCommand({ Bucket: 'alpha', Key: mpKey, UploadId, PartNumber: i + 1, Body: body }));
    parts.push({ ETag, PartNumber: i + 1 });
  }
  const done = await root.send(new CompleteMultipartUploadCommand({ Bucket: 'alpha', Key: mpKey, UploadId, MultipartUpload: { Parts: parts } }));
  const whole = Buffer.concat(partBodies);
  manifest.objects.push({
    bucket: 'alpha',
    key: mpKey,
    size: whole.length,
    sha256: sha256(whole),
    etag: done.ETag!,
    contentType: 'application/x-fixture',
    metadata: { parts: '2' },
    tags: [],
    parts: partBodies.map((b) => b.length),
  });

  // An instant-upload pair: the second upload of the same bytes (x-service-md5) commits without storing them again.
  const dup = fixtureBody('duplicate', 100_000);
  const md5 = createHash('md5').update(dup).digest('hex');
  for (const [i, key] of manifest.instantPair.keys.entries()) {
    const res = await fetch(`${endpoint}/beta/${key}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${rootToken}`, 'x-service-md5': md5 },
      body: new Uint8Array(dup),
    });
    const answer = (await res.json()) as { data: { instant: boolean; etag: string } };
    if (!res.ok || answer.data.instant !== (i === 1)) throw new Error(`instant upload ${key}: ${res.status} ${JSON.stringify(answer)}`);
    manifest.objects.push({
      bucket: 'beta',
      key,
      size: dup.length,
      sha256: sha256(dup),
      etag: `"${answer.data.etag}"`,
      contentType: 'application/octet-stream',
      metadata: {},
      tags: [],
    });
  }

  // Soft-deleted: in the recycle bin, one inline and one file.
  for (const [key, size] of [
    ['trash/inline.txt', 500],
    ['trash/file.bin', 150_000],
  ] as const) {
    const body = fixtureBody(key, size);
    await put(root, 'beta', key, body);
    await root.send(new DeleteObjectCommand({ Bucket: 'beta', Key: key }));
    manifest.recycled.push({ bucket: 'beta', key, size, sha256: sha256(body) });
  }
  return manifest;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main();
}
