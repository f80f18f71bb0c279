/**
 * Microbenchmark of the data plane's commit statement on embedded PGlite, the statement that bounds
 * small PUTs in the standalone platform: strata_commit_objects (images/control-plane/src/schema/functions/)
 * with batches of `--batch` items beside its baseline, the same items committed one by one (batches of
 * one, as without group commit), alternated in one process on one database. Not a test: prints the
 * median ms per item of CPU time (the process's: PGlite runs on its thread) and of wall time.
 *
 *   npx tsx hack/bench/commit-function.ts [--batch 12] [--seconds 3] [--rounds 3] [--bodies one|distinct] [--inline]
 *     [--candidate file.sql] [--baseline <commit>] [--alter file.sql]
 *
 * `--candidate` loads a SQL file defining `strata_commit_objects_candidate(p_items jsonb)` (a changed
 * version of the commit function, before it replaces its file) and times it beside the others.
 * `--alter` applies a SQL file (a candidate migration: storage parameters, indexes) to a second fresh
 * database, migrated as the first, and times strata_commit_objects there too.
 * `--baseline` times the single-item function `strata_commit_object` of an older commit's migrations
 * (read with `git show <commit>:...`; its 20-argument form), one item per call, on a second fresh
 * database, alternated with the others.
 *
 * Like the object-store benchmark's PUTs: 1000 keys written in turn (each PUT replaces a version), 4 KiB
 * bodies, either one body for all (every object shares one blob) or a different body per PUT.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

const { values } = parseArgs({
  options: {
    batch: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    bodies: { type: 'string', default: 'one' },
    inline: { type: 'boolean', default: false },
    candidate: { type: 'string' },
    baseline: { type: 'string' },
    alter: { type: 'string' },
  },
});
const batchSize = Number(values.batch);
const seconds = Number(values.seconds);
const KEYS = 1000;
const SIZE = 4096;
const MIGRATIONS = 'images/control-plane/src/schema/migrations';

/** One database with a bucket whose 1000 keys are each written once. */
interface Target {
  sql: SqlClient;
  bucketId: number;
  written: number;
}

const dir = mkdtempSync(path.join(tmpdir(), 'strata-commit-bench-'));
const clients: SqlClient[] = [];

async function openDatabase(name: string, schema: (sql: SqlClient) => Promise<unknown>): Promise<Target> {
  const sql = await createPgliteSqlClient(path.join(dir, name));
  clients.push(sql);
  await schema(sql);
  const bucketId = (await sql.query<{ id: number }>("INSERT INTO buckets (name, owner) VALUES ('bench', 'root') RETURNING id")).rows[0]!.id;
  return { sql, bucketId, written: 0 };
}

/** The versioned migrations of `commit`, applied in order as that commit's migrate.ts did. */
async function migrateAt(sql: SqlClient, commit: string): Promise<void> {
  const files = execFileSync('git', ['ls-tree', '--name-only', `${commit}:${MIGRATIONS}`], { encoding: 'utf8' })
    .split('\n')
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort();
  for (const file of files) await sql.exec(execFileSync('git', ['show', `${commit}:${MIGRATIONS}/${file}`], { encoding: 'utf8' }));
}

try {
  const current = await openDatabase('current', async (sql) => {
    await migrate(sql);
    if (values.candidate) await sql.query(readFileSync(values.candidate, 'utf8'));
  });
  const baseline = values.baseline ? await openDatabase('baseline', (sql) => migrateAt(sql, values.baseline!)) : undefined;
  const altered = values.alter
    ? await openDatabase('altered', async (sql) => {
        await migrate(sql);
        await sql.exec(readFileSync(values.alter!, 'utf8'));
      })
    : undefined;

  const oneBody = { md5: randomBytes(16).toString('hex'), data: randomBytes(SIZE).toString('base64') };
  const item = (target: Target) => {
    const body = values.bodies === 'distinct' ? { md5: randomBytes(16).toString('hex'), data: randomBytes(SIZE).toString('base64') } : oneBody;
    const key = `k/${target.written++ % KEYS}`;
    return {
      bucketId: target.bucketId,
      key,
      owner: 'root',
      backendKey: 'fs:/data',
      backend: { kind: 'fs' },
      locator: values.inline ? `i${randomUUID().replaceAll('-', '')}` : randomUUID(),
      blobMd5: body.md5,
      blobSize: SIZE,
      ...(values.inline ? { data: body.data } : {}),
      size: SIZE,
      etag: `"${body.md5}"`,
      md5: body.md5,
      contentType: 'application/octet-stream',
      userMetadata: {},
      now: new Date().toISOString(),
      eventId: randomUUID(),
      payload: { bucket: 'bench', key, size: SIZE },
    };
  };
  const expectOk = (rows: Array<{ r_status: string }>, size: number) => {
    if (rows.length !== size || rows.some((r) => r.r_status !== 'ok')) throw new Error(`unexpected answer: ${JSON.stringify(rows)}`);
  };
  const commitBatch = async (target: Target, fn: string, size: number) => {
    const items = JSON.stringify(Array.from({ length: size }, () => item(target)));
    expectOk((await target.sql.query<{ r_status: string }>(`SELECT * FROM ${fn}($1)`, [items])).rows, size);
  };
  /** The item as the baseline's strata_commit_object arguments (as its data plane passed them). */
  const commitSingle = async (target: Target) => {
    const i = item(target);
    const args = [
      i.bucketId,
      i.key,
      i.owner,
      null,
      i.backendKey,
      JSON.stringify(i.backend),
      i.locator,
      i.blobMd5,
      i.blobSize,
      i.size,
      i.etag,
      i.md5,
      i.contentType,
      JSON.stringify(i.userMetadata),
      i.now,
      i.eventId,
      JSON.stringify(i.payload),
      i.data !== undefined ? Buffer.from(i.data, 'base64') : null,
      null,
      null,
    ];
    const placeholders = args.map((_, n) => `$${n + 1}`).join(', ');
    expectOk((await target.sql.query<{ r_status: string }>(`SELECT * FROM strata_commit_object(${placeholders})`, args)).rows, 1);
  };

  /** What is timed: `batch` items per step, through one call or one by one. */
  const contenders: Record<string, { target: Target; step: () => Promise<void> }> = {
    strata_commit_objects: { target: current, step: () => commitBatch(current, 'strata_commit_objects', batchSize) },
  };
  if (batchSize > 1) {
    contenders['strata_commit_objects one by one'] = {
      target: current,
      step: async () => {
        for (let i = 0; i < batchSize; i++) await commitBatch(current, 'strata_commit_objects', 1);
      },
    };
  }
  if (values.candidate)
    contenders.strata_commit_objects_candidate = { target: current, step: () => commitBatch(current, 'strata_commit_objects_candidate', batchSize) };
  if (altered)
    contenders[`strata_commit_objects after ${path.basename(values.alter!)}`] = {
      target: altered,
      step: () => commitBatch(altered, 'strata_commit_objects', batchSize),
    };
  if (baseline) {
    contenders[`strata_commit_object of ${values.baseline} one by one`] = {
      target: baseline,
      step: async () => {
        for (let i = 0; i < batchSize; i++) await commitSingle(baseline);
      },
    };
  }
  const names = Object.keys(contenders);

  /** Ms per item of CPU time and of wall time over `ms` of steps. */
  const run = async (name: string, ms: number) => {
    let items = 0;
    const cpu = process.cpuUsage();
    const start = performance.now();
    while (performance.now() - start < ms) {
      await contenders[name]!.step();
      items += batchSize;
    }
    const wall = performance.now() - start;
    const used = process.cpuUsage(cpu);
    return { cpu: (used.user + used.system) / 1000 / items, wall: wall / items };
  };
  // Fill every key once (the baseline's commit also has strata_commit_objects), then warm up the plans.
  for (const target of new Set(Object.values(contenders).map((c) => c.target))) {
    while (target.written < KEYS) await commitBatch(target, 'strata_commit_objects', 10);
  }
  for (const name of names) await run(name, 1000);
  const cpuMs: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const wallMs: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  // Each round starts with the next contender: the one timed last in a round is measured faster than an
  // identical copy timed first (the table's state after the others), so no contender keeps one place.
  for (let round = 0; round < Number(values.rounds); round++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length]!;
      const t = await run(name, seconds * 1000);
      cpuMs[name]!.push(+t.cpu.toFixed(4));
      wallMs[name]!.push(+t.wall.toFixed(4));
    }
  }
  for (const target of new Set(Object.values(contenders).map((c) => c.target))) {
    const check = await target.sql.query<{ normal: number }>("SELECT count(*)::int AS normal FROM object_info WHERE state = 'NORMAL'");
    if (check.rows[0]!.normal !== KEYS) throw new Error(`expected ${KEYS} live objects, found ${check.rows[0]!.normal}`);
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return +(s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2).toFixed(4);
  };
  const medians = (m: Record<string, number[]>) => Object.fromEntries(Object.entries(m).map(([n, xs]) => [n, median(xs)]));
  console.log(
    JSON.stringify(
      { batch: batchSize, bodies: values.bodies, inline: values.inline, cpuMsPerItem: medians(cpuMs), wallMsPerItem: medians(wallMs), cpuMs, wallMs },
      null,
      1,
    ),
  );
} finally {
  for (const sql of clients) await sql.close();
  rmSync(dir, { recursive: true, force: true });
}
