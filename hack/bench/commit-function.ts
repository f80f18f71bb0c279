/**
 * Microbenchmark of the data plane's commit statement on embedded PGlite, the statement that bounds
 * small PUTs in the standalone platform: strata_commit_objects (images/control-plane/src/schema/functions/)
 * with batches of `--batch` items beside its baseline, the same items committed one by one (batches of
 * one, as without group commit), alternated in one process on one database. Not a test: prints ms per item.
 *
 *   npx tsx hack/bench/commit-function.ts [--batch 12] [--seconds 3] [--rounds 3] [--bodies one|distinct] [--inline] [--candidate file.sql]
 *
 * `--candidate` loads a SQL file defining `strata_commit_objects_candidate(p_items jsonb)` (a changed
 * version of the commit function, before it replaces its file) and times it beside the other two.
 *
 * Like the object-store benchmark's PUTs: 1000 keys written in turn (each PUT replaces a version), 4 KiB
 * bodies, either one body for all (every object shares one blob) or a different body per PUT.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { createPgliteSqlClient } from '../../images/service-kit/src/index.js';

const { values } = parseArgs({
  options: {
    batch: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    bodies: { type: 'string', default: 'one' },
    inline: { type: 'boolean', default: false },
    candidate: { type: 'string' },
  },
});
const batchSize = Number(values.batch);
const seconds = Number(values.seconds);
const KEYS = 1000;
const SIZE = 4096;

const dir = mkdtempSync(path.join(tmpdir(), 'strata-commit-bench-'));
const sql = await createPgliteSqlClient(path.join(dir, 'pg'));
try {
  await migrate(sql);
  if (values.candidate) await sql.query(readFileSync(values.candidate, 'utf8'));
  const bucketId = (await sql.query<{ id: number }>("INSERT INTO buckets (name, owner) VALUES ('bench', 'root') RETURNING id")).rows[0]!.id;
  const oneBody = { md5: randomBytes(16).toString('hex'), data: randomBytes(SIZE).toString('base64') };
  let n = 0;
  const item = () => {
    const body = values.bodies === 'distinct' ? { md5: randomBytes(16).toString('hex'), data: randomBytes(SIZE).toString('base64') } : oneBody;
    const key = `k/${n++ % KEYS}`;
    return {
      bucketId, key, owner: 'root',
      backendKey: 'fs:/data', backend: { kind: 'fs' }, locator: values.inline ? `i${randomUUID().replaceAll('-', '')}` : randomUUID(),
      blobMd5: body.md5, blobSize: SIZE, ...(values.inline ? { data: body.data } : {}),
      size: SIZE, etag: `"${body.md5}"`, md5: body.md5, contentType: 'application/octet-stream', userMetadata: {},
      now: new Date().toISOString(), eventId: randomUUID(), payload: { bucket: 'bench', key, size: SIZE },
    };
  };
  const batch = (size = batchSize) => JSON.stringify(Array.from({ length: size }, item));
  const commit = async (fn: string, size: number) => {
    const res = await sql.query<{ r_status: string }>(`SELECT * FROM ${fn}($1)`, [batch(size)]);
    if (res.rows.length !== size || res.rows.some((r) => r.r_status !== 'ok')) throw new Error(`unexpected answer: ${JSON.stringify(res.rows)}`);
  };
  /** `fn` with whole batches, or (ONE_BY_ONE) strata_commit_objects with the same items one at a time. */
  const ONE_BY_ONE = 'strata_commit_objects one by one';
  const run = async (fn: string, ms: number) => {
    let items = 0;
    const start = performance.now();
    while (performance.now() - start < ms) {
      if (fn === ONE_BY_ONE) for (let i = 0; i < batchSize; i++) await commit('strata_commit_objects', 1);
      else await commit(fn, batchSize);
      items += batchSize;
    }
    return (performance.now() - start) / items;
  };
  // Fill every key once, then warm up the plans.
  while (n < KEYS) await sql.query('SELECT * FROM strata_commit_objects($1)', [batch()]);
  const functions = ['strata_commit_objects', ONE_BY_ONE, ...(values.candidate ? ['strata_commit_objects_candidate'] : [])];
  for (const fn of functions) await run(fn, 1000);
  const msPerItem: Record<string, number[]> = Object.fromEntries(functions.map((fn) => [fn, []]));
  // Each round starts with the next function: the one timed last in a round measured ~15% faster than an
  // identical copy timed first (the table's state after the others), so no function keeps one place.
  for (let round = 0; round < Number(values.rounds); round++) {
    for (let i = 0; i < functions.length; i++) {
      const fn = functions[(round + i) % functions.length]!;
      msPerItem[fn]!.push(+(await run(fn, seconds * 1000)).toFixed(4));
    }
  }
  const check = await sql.query<{ normal: number }>("SELECT count(*)::int AS normal FROM object_info WHERE state = 'NORMAL'");
  if (check.rows[0]!.normal !== KEYS) throw new Error(`expected ${KEYS} live objects, found ${check.rows[0]!.normal}`);
  console.log(JSON.stringify({ batch: batchSize, bodies: values.bodies, inline: values.inline, msPerItem }));
} finally {
  await sql.close();
  rmSync(dir, { recursive: true, force: true });
}
