/**
 * Where a small GET's CPU goes: the standalone process (object store only) under wrk GETs of 4 KiB
 * objects through presigned URLs (as hack/bench/compare.ts measures them), then a summary of its V8
 * CPU profile (`node --cpu-prof`): self time by function, the top entries.
 *
 *   npx tsx hack/bench/get-profile.ts                 (10 s of load, profile under $TMPDIR)
 *   BENCH_SECONDS=5 BENCH_TOP=50 BENCH_PROFILE_DIR=/tmp/prof npx tsx hack/bench/get-profile.ts
 *   BENCH_NO_PROFILE=1 ...                            (ops/s only, no profiler overhead)
 *   BENCH_REPO=/work/main ...                         (that checkout's server, e.g. a baseline)
 *   BENCH_PUT_SECONDS=10 ...                          (first overwrite the keys for that long, distinct bodies, as
 *                                                      bench:compare's round does before its next GET run)
 * The load run starts once the server is near idle (the setup's background work done).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  answerLookups,
  frameName,
  loadAverages,
  mainThreadSeconds,
  profileFiles,
  putSmallObjects,
  ranked,
  readProfile,
  samplesBetween,
  startBenchServer,
  type CpuProfile,
} from './standalone-bench.js';
import { cpuSeconds, stopAll } from './stacks.js';
import { checkTargets, runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const TOP = Number(process.env.BENCH_TOP ?? 40);
const PROFILE = process.env.BENCH_NO_PROFILE === undefined;
const PUT_SECONDS = Number(process.env.BENCH_PUT_SECONDS ?? 0);
const KEYS = 1000;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const serverRepo = path.resolve(process.env.BENCH_REPO ?? repo);

/**
 * Self time per function (name, file, line), in percent of the samples taken in the last `fromEndUs`
 * to `untilEndUs` microseconds of the profile (the load run), largest first.
 */
function selfTimes(profile: CpuProfile, fromEndUs: number, untilEndUs: number): Array<[string, number]> {
  const { nodes } = samplesBetween(profile, fromEndUs, untilEndUs);
  const counts = new Map<string, number>();
  for (const node of nodes) counts.set(frameName(node, serverRepo), (counts.get(frameName(node, serverRepo)) ?? 0) + 1);
  return ranked(counts, nodes.length);
}

/**
 * Wait (at most 30 s) until the server is near idle (≤ 5 % of a core over a second; 20 % while the
 * profiler samples): the setup's PUTs leave background work (events applied by the control plane,
 * flushes on the PGlite thread) that would otherwise be counted in the GETs' CPU. Seconds waited.
 */
async function settle(pid: number | undefined): Promise<number> {
  const start = performance.now();
  const idle = PROFILE ? 0.2 : 0.05;
  let before = await cpuSeconds(pid);
  while (performance.now() - start < 30_000) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await cpuSeconds(pid);
    if (now - before <= idle) break;
    before = now;
  }
  return (performance.now() - start) / 1000;
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-get-profile-'));
  const profDir = process.env.BENCH_PROFILE_DIR ?? path.join(work, 'prof');
  const prof = PROFILE ? ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${profDir}`] : [];
  const server = await startBenchServer(serverRepo, path.join(work, 'strata'), prof);
  const { child, origin, target } = server;
  let started = 0;
  let stopped = 0;
  try {
    const keys = await putSmallObjects(server, KEYS, 4096);
    const gets = keys.map((k) => target('GET', k));
    const settleNow = async () => {
      const settled = await settle(child.pid);
      console.log(`server settled after ${settled.toFixed(1)} s (background work of the setup's PUTs)`);
    };
    // Hot GETs: the keys' answers kept by a warm-up after the PUTs' background work is done (kept answers
    // live 30 s). Cold GETs (BENCH_PUT_SECONDS): the warm-up, then the overwrites, then the run.
    if (PUT_SECONDS === 0) await settleNow();
    await checkTargets({ origin, method: 'GET', targets: gets, expectBytes: 4096 });
    await runWrk({ origin, method: 'GET', targets: gets, seconds: 2, connections: 16, threads: 1 });
    if (PUT_SECONDS > 0) {
      const puts = keys.map((k) => target('PUT', k));
      await runWrk({ origin, method: 'PUT', targets: puts, body: randomBytes(4096), bodies: 'distinct', seconds: PUT_SECONDS, connections: 16, threads: 1 });
      await settleNow();
    }
    const hits0 = await answerLookups(origin);
    const cpu0 = await cpuSeconds(child.pid);
    const main0 = await mainThreadSeconds(child.pid);
    started = performance.now();
    const fig = await runWrk({ origin, method: 'GET', targets: gets, seconds: SECONDS, connections: 16, threads: 1 });
    const cpu = (await cpuSeconds(child.pid)) - cpu0;
    const mainCpu = (await mainThreadSeconds(child.pid)) - main0;
    stopped = performance.now();
    const hits = await answerLookups(origin);
    console.log(`gateway answers during the run: ${hits.hits - hits0.hits} hits, ${hits.misses - hits0.misses} misses`);
    console.log(
      `${serverRepo}: GET 4 KiB ${fig.opsPerSec.toFixed(0)}/s, server CPU ${((1000 * cpu) / fig.requests).toFixed(3)} ms per request ` +
        `(main thread ${((1000 * mainCpu) / fig.requests).toFixed(3)}), ` +
        `load ${loadAverages()}`,
    );
  } finally {
    await stopAll([child]);
  }
  await server.exited;
  const end = performance.now();
  if (PROFILE) {
    // The main thread's profile (worker threads write their own, numbered after it).
    const files = await profileFiles(profDir);
    const profile = await readProfile(path.join(profDir, files[0]!));
    for (const [name, pct] of selfTimes(profile, (end - started) * 1000, (end - stopped) * 1000).slice(0, TOP))
      console.log(`${pct.toFixed(1).padStart(5)} %  ${name}`);
    console.log(
      `profile: ${path.join(profDir, files[0]!)}, load run ${Math.round((end - started) * 1000)} to ${Math.round((end - stopped) * 1000)} µs before its end`,
    );
  }
  if (!process.env.BENCH_PROFILE_DIR) await rm(work, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
