/**
 * CPU time per durable write through the PGlite thread (createPgliteSqlClient on disk, `thread: true`),
 * this tree against another build's service kit in the same run, alternating A/B rounds:
 *
 *   git archive <base> images/service-kit/src | tar -x -C hack/bench/.ab-base
 *   npx tsx hack/bench/pglite-thread-writes.ts            (BENCH_WRITES=2000, BENCH_ROUNDS=3)
 *
 * Each round opens a fresh database, then runs BENCH_WRITES single-row INSERTs, 16 at a time; CPU time
 * is process.cpuUsage() over the writes (the event loop and the PGlite thread together).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

type Open = (
  dir: string,
  opts: { thread: boolean },
) => Promise<{ exec(s: string): Promise<void>; query(t: string, p?: unknown[]): Promise<unknown>; close(): Promise<void> }>;
const WRITES = Number(process.env.BENCH_WRITES ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 16;
/** The other build's sql.js (a module path, so that tsc does not ask for it). */
const BASE_KIT = process.env.BENCH_BASE_KIT ?? './.ab-base/images/service-kit/src/sql.js';

const variants: Array<[string, Open]> = [
  ['base', ((await import(BASE_KIT)) as { createPgliteSqlClient: Open }).createPgliteSqlClient],
  ['branch', (await import('../../images/service-kit/src/sql.js')).createPgliteSqlClient as Open],
];

const results: Record<string, number[]> = { base: [], branch: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, open] of round % 2 ? [...variants].reverse() : variants) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-bench-pglite-'));
    const sql = await open(path.join(dir, 'db'), { thread: true });
    await sql.exec('CREATE TABLE t (id serial PRIMARY KEY, v text)');
    const start = process.cpuUsage();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < WRITES) await sql.query('INSERT INTO t (v) VALUES ($1)', ['x'.repeat(64)]);
      }),
    );
    const cpu = process.cpuUsage(start);
    results[name]!.push((cpu.user + cpu.system) / WRITES);
    await sql.close();
    await rm(dir, { recursive: true, force: true });
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [name, xs] of Object.entries(results))
  console.log(`${name}: CPU µs/write median ${median(xs).toFixed(1)} (rounds ${xs.map((x) => x.toFixed(1)).join(', ')})`);
console.log(
  `load average: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
