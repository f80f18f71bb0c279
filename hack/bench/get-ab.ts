/**
 * Hot small GETs of two checkouts side by side in one run: both standalone servers (object store only)
 * are started and filled once (1 000 keys of 4 KiB), then short wrk runs (presigned URLs, 16
 * connections, 1 thread, as bench:compare) alternate between them, each after a read of every key (answers
 * kept more than 30 s ago are kept anew) and a 1 s warm-up. Per run: GETs/s, the server's CPU per request
 * from /proc (whole process and main thread) and the gateway's answer-cache misses; then the medians, of all
 * runs and of the runs without a miss (hot GETs only). On a loaded host the alternation is what makes the
 * two comparable: each pair of runs meets the same load.
 *
 *   BENCH_REPO_A=/tmp/base BENCH_REPO_B=. npx tsx hack/bench/get-ab.ts     (B defaults to this checkout)
 *   BENCH_ROUNDS=6 BENCH_SECONDS=3 ...                                      (the defaults)
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { answerLookups, mainThreadSeconds, putSmallObjects, startBenchServer } from './standalone-bench.js';
import { cpuSeconds, stopAll } from './stacks.js';
import { checkTargets, runWrk } from './wrk.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const KEYS = 1000;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Server {
  name: string;
  child: ChildProcess;
  origin: string;
  gets: string[];
  runs: Array<{ opsPerSec: number; cpuMs: number; mainMs: number; misses: number }>;
}

async function start(name: string, serverRepo: string, work: string): Promise<Server> {
  const server = await startBenchServer(serverRepo, path.join(work, name));
  const { child, origin } = server;
  const gets = (await putSmallObjects(server, KEYS, 4096)).map((k) => server.target('GET', k));
  await checkTargets({ origin, method: 'GET', targets: gets.slice(0, 10), expectBytes: 4096 });
  return { name, child, origin, gets, runs: [] };
}

async function measure(s: Server): Promise<void> {
  // Every key read once first: answers kept more than 30 s ago (while the other server ran) are kept anew,
  // so that fewer runs meet a burst of expiries (the rest still expire on their own schedule).
  await checkTargets({ origin: s.origin, method: 'GET', targets: s.gets, expectBytes: 4096 });
  await runWrk({ origin: s.origin, method: 'GET', targets: s.gets, seconds: 1, connections: 16, threads: 1 });
  const [cpu0, main0, miss0] = [await cpuSeconds(s.child.pid), await mainThreadSeconds(s.child.pid), (await answerLookups(s.origin)).misses];
  const fig = await runWrk({ origin: s.origin, method: 'GET', targets: s.gets, seconds: SECONDS, connections: 16, threads: 1 });
  const [cpu, main, miss] = [await cpuSeconds(s.child.pid), await mainThreadSeconds(s.child.pid), (await answerLookups(s.origin)).misses];
  const run = { opsPerSec: fig.opsPerSec, cpuMs: (1000 * (cpu - cpu0)) / fig.requests, mainMs: (1000 * (main - main0)) / fig.requests, misses: miss - miss0 };
  s.runs.push(run);
  console.log(
    `${s.name}: ${run.opsPerSec.toFixed(0)}/s, ${run.cpuMs.toFixed(3)} ms CPU per request (main thread ${run.mainMs.toFixed(3)}), ${run.misses} misses, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-get-ab-'));
  const repos = { A: path.resolve(process.env.BENCH_REPO_A ?? repo), B: path.resolve(process.env.BENCH_REPO_B ?? repo) };
  const servers: Server[] = [];
  try {
    for (const [name, dir] of Object.entries(repos)) servers.push(await start(name, dir, work));
    // (Settle: the setup's PUTs leave background work.)
    await new Promise((r) => setTimeout(r, 10_000));
    for (let round = 0; round < ROUNDS; round++) for (const s of round % 2 === 0 ? servers : [...servers].reverse()) await measure(s);
    const medians = (runs: Server['runs']) =>
      `${median(runs.map((r) => r.opsPerSec)).toFixed(0)}/s, ${median(runs.map((r) => r.cpuMs)).toFixed(3)} ms CPU per request ` +
      `(main thread ${median(runs.map((r) => r.mainMs)).toFixed(3)})`;
    for (const s of servers) {
      // Kept answers expire 30 s after they were stored, whatever their reads: a run may still meet a burst of misses.
      const hot = s.runs.filter((r) => r.misses === 0);
      console.log(
        `${s.name} ${repos[s.name as 'A' | 'B']}: medians of all runs ${medians(s.runs)}; ` +
          (hot.length ? `of the ${hot.length} runs without a miss ${medians(hot)}` : 'no run without a miss'),
      );
    }
  } finally {
    await stopAll(servers.map((s) => s.child));
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
