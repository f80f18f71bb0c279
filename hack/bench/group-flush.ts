/**
 * How many concurrent small-object commits share one WAL flush on the standalone's durable PGlite (on its
 * thread, fsync on: pglite-fsync.ts), with the data plane's group commit (one statement for the commits
 * of one event-loop turn, catalog/group-commit.ts) on (two batches in flight: the next one runs while the
 * one before waits for its sync), `serial` (one batch at a time) and off, alternated in one process on
 * one database.
 * Not a test: prints commits/s, CPU ms per commit (the process's, PGlite's thread included) and the WAL
 * fdatasyncs per commit. `--writers` concurrent writers (as the benchmark's 16 connections), each
 * committing a new inline 4 KiB body to one of 1000 keys in turn.
 *
 *   npx tsx hack/bench/group-flush.ts [--writers 16] [--seconds 3] [--rounds 2] [--modes on,serial,off]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { ObjectCommit } from '../../images/data-plane/src/catalog/commit.js';
import { createPgliteSqlClient } from '../../images/service-kit/src/index.js';
import type { PgliteThreadClient } from '../../images/service-kit/src/pglite-thread.js';

const { values } = parseArgs({
  options: {
    writers: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '2' },
    modes: { type: 'string' },
  },
});
const WRITERS = Number(values.writers);
const SIZE = 4096;
const KEYS = 1000;

const dir = mkdtempSync(path.join(tmpdir(), 'strata-group-flush-'));
const sql = (await createPgliteSqlClient(path.join(dir, 'pglite'), { thread: true, fsync: true })) as PgliteThreadClient;
try {
  await migrate(sql);
  const id = Number((await sql.query<{ id: number }>("INSERT INTO buckets (name, owner) VALUES ('bench', 'root') RETURNING id")).rows[0]!.id);
  const bucket = { id, name: 'bench', owner: 'root', backend: { kind: 'fs' } };
  const commits = {
    on: new ObjectCommit(sql, { groupCommit: true }),
    serial: new ObjectCommit(sql, { groupCommit: true, batchesInFlight: 1 }),
    off: new ObjectCommit(sql, { groupCommit: false }),
  };
  let written = 0;
  const commitOne = (via: ObjectCommit) => {
    const data = randomBytes(SIZE);
    const md5 = randomBytes(16).toString('hex');
    return via.commit({
      bucket,
      key: `k/${written++ % KEYS}`,
      owner: 'root',
      blob: { kind: 'new', backendKey: 'fs:/data', backend: bucket.backend, locator: `i${randomUUID().replaceAll('-', '')}`, md5, size: SIZE, data },
      etag: md5,
      md5,
      size: SIZE,
      contentType: 'application/octet-stream',
      userMetadata: {},
      now: new Date(),
    });
  };
  type Mode = keyof typeof commits;
  const run = async (mode: Mode, seconds: number) => {
    const before = (await sql.durability())!;
    const cpu = process.cpuUsage();
    const start = performance.now();
    let n = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (performance.now() - start < seconds * 1000) {
          await commitOne(commits[mode]);
          n++;
        }
      }),
    );
    const wall = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    const after = (await sql.durability())!;
    return {
      perSecond: Math.round(n / wall),
      cpuMsPerCommit: +((used.user + used.system) / 1000 / n).toFixed(3),
      walSyncsPerCommit: +((after.walSyncs - before.walSyncs) / n).toFixed(3),
    };
  };
  for (let i = 0; i < KEYS; i += WRITERS) await Promise.all(Array.from({ length: WRITERS }, () => commitOne(commits.on)));
  const modes = (values.modes ?? 'on,serial,off').split(',') as Mode[];
  for (const mode of modes) await run(mode, 1);
  const results: Record<string, unknown[]> = Object.fromEntries(modes.map((m) => [m, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    // Each mode's place in the round rotates (the one timed last measured faster).
    for (let j = 0; j < modes.length; j++) {
      const mode = modes[(round + j) % modes.length]!;
      results[mode]!.push(await run(mode, Number(values.seconds)));
    }
  }
  console.log(JSON.stringify({ writers: WRITERS, groupCommit: results }, null, 1));
} finally {
  await sql.close();
  rmSync(dir, { recursive: true, force: true });
}
