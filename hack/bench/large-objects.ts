/**
 * Large objects through `npm start` (the standalone process as its own child, object store only): PUT and
 * GET of one object with curl (SigV4 presigned URLs), into a plain bucket and into one with default
 * encryption (SSE-S3), alternated, and the server process's CPU per MiB besides the wall-clock rate. On a
 * shared machine the CPU per MiB is the steadier figure: it says what a transfer costs whatever else runs.
 *
 *   npx tsx hack/bench/large-objects.ts                  # ROUNDS=3 LARGE_MIB=256
 *   BENCH_CPU_PROF=/tmp/prof npx tsx hack/bench/large-objects.ts   # also a V8 CPU profile of the server
 *   BUCKETS=plain npx tsx hack/bench/large-objects.ts    # only the plain bucket
 */
import os from 'node:os';
import { loadAverages, mainThreadSeconds, startLargeBench } from './standalone-bench.js';
import { cpuSeconds } from './stacks.js';
import { curlTransfer } from './transfer.js';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const MIB = Number(process.env.LARGE_MIB ?? 256);
const BUCKETS = (process.env.BUCKETS ?? 'plain,sealed').split(',');

const { child, sign, file, size, close } = await startLargeBench('strata-large', BUCKETS, MIB);
try {
  const results: Record<string, Array<[number, number, number]>> = {};
  const measure = async (name: string, run: () => Promise<number>) => {
    const cpu = await cpuSeconds(child.pid);
    const main = await mainThreadSeconds(child.pid);
    const from = process.hrtime.bigint() / 1000n;
    const rate = await run();
    // Windows for reading a CPU profile by operation (the profile's timestamps are this same monotonic clock, in µs).
    if (process.env.BENCH_CPU_PROF) console.error(`window ${name.replaceAll(' ', '_')} ${from} ${process.hrtime.bigint() / 1000n}`);
    (results[name] ??= []).push([rate, (((await cpuSeconds(child.pid)) - cpu) * 1000) / MIB, (((await mainThreadSeconds(child.pid)) - main) * 1000) / MIB]);
  };
  // A first PUT and GET of each, unmeasured (the first large upload allocates the pools, starts the MD5 thread).
  for (const b of BUCKETS) {
    await curlTransfer('PUT', sign('PUT', `/${b}/large`), size, file);
    await curlTransfer('GET', sign('GET', `/${b}/large`), size);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of round % 2 ? [...BUCKETS].reverse() : BUCKETS) {
      await measure(`PUT ${MIB} MiB ${b}`, () => curlTransfer('PUT', sign('PUT', `/${b}/large`), size, file));
      await measure(`GET ${MIB} MiB ${b}`, () => curlTransfer('GET', sign('GET', `/${b}/large`), size));
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`large objects through npm start — ${os.cpus().length} cores, ${ROUNDS} rounds, load ${loadAverages()}`);
  console.log('                       MiB/s (median; rounds)        server CPU ms/MiB, all threads     its main thread (event loop)');
  const cell = (v: number[], digits: number) => `${median(v).toFixed(digits)} (${v.map((x) => x.toFixed(digits)).join(' ')})`;
  for (const [name, values] of Object.entries(results)) {
    const column = (i: number) => values.map((v) => v[i]!);
    console.log(`${name.padEnd(22)} ${cell(column(0), 0).padEnd(30)} ${cell(column(1), 2).padEnd(34)} ${cell(column(2), 2)}`);
  }
} finally {
  await close();
}
