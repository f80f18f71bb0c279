/**
 * Where a small PUT's CPU goes: the standalone process (object store only) under wrk PUTs of 4 KiB
 * distinct bodies over 1 000 keys through presigned URLs (as hack/bench/compare.ts measures them), with
 * the CPU per PUT of the whole process and of its busiest threads (/proc/<pid>/task: the event loop is
 * the thread whose id is the pid, PGlite's thread the busiest other one), each less what that thread
 * spends over as long idle (measured just before), then, unless
 * BENCH_NO_PROFILE, a summary of each thread's V8 CPU profile (`node --cpu-prof`) cut to the load run:
 * share of busy samples by nearest project file, and self time by function.
 *
 *   npx tsx hack/bench/put-profile.ts                 (5 s of load)
 *   BENCH_SECONDS=10 BENCH_TOP=40 BENCH_PROFILE_DIR=/tmp/prof npx tsx hack/bench/put-profile.ts
 *   BENCH_NO_PROFILE=1 ...                            (CPU per PUT only, no profiler overhead)
 *   BENCH_REPO=/path/to/checkout ...                  (that checkout's server, e.g. a baseline)
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  frameName,
  loadAverages,
  profileFiles,
  putSmallObjects,
  ranked,
  readProfile,
  samplesBetween,
  shortUrl,
  startBenchServer,
  threadCpu,
  type CpuProfile,
} from './standalone-bench.js';
import { stopAll } from './stacks.js';
import { runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const TOP = Number(process.env.BENCH_TOP ?? 25);
const PROFILE = process.env.BENCH_NO_PROFILE === undefined;
const KEYS = 1000;
/** The idle stretch whose CPU is taken as the process's background. */
const IDLE_MS = 3000;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const serverRepo = path.resolve(process.env.BENCH_REPO ?? repo);

/**
 * Busy samples of the last `fromEndUs` to `untilEndUs` µs of the profile: share by nearest project file
 * (images/…, else GC, else the first package or built-in on the stack) and self time by function.
 */
function summarise(
  profile: CpuProfile,
  fromEndUs: number,
  untilEndUs: number,
): { busy: number; idle: number; files: Array<[string, number]>; self: Array<[string, number]> } {
  const { nodes, byId, parent } = samplesBetween(profile, fromEndUs, untilEndUs);
  const nearest = (id: number): string => {
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const url = shortUrl(byId.get(cur)!.callFrame.url, serverRepo);
      if (url.startsWith('images/')) return url;
    }
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === '(garbage collector)' || functionName === '(program)') return functionName;
    return `(no project frame) ${shortUrl(url, serverRepo).split('/').slice(0, 2).join('/') || functionName}`;
  };
  const files = new Map<string, number>();
  const self = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const node of nodes) {
    if (node.callFrame.functionName === '(idle)') {
      idle++;
      continue;
    }
    busy++;
    const file = nearest(node.id);
    files.set(file, (files.get(file) ?? 0) + 1);
    const name = frameName(node, serverRepo);
    self.set(name, (self.get(name) ?? 0) + 1);
  }
  return { busy, idle, files: ranked(files, busy), self: ranked(self, busy) };
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-put-profile-'));
  const profDir = process.env.BENCH_PROFILE_DIR ?? path.join(work, 'prof');
  const prof = PROFILE ? ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${profDir}`] : [];
  const server = await startBenchServer(serverRepo, path.join(work, 'strata'), prof);
  const { child, origin } = server;
  let started = 0;
  let stopped = 0;
  try {
    const puts = (await putSmallObjects(server, KEYS, 4096)).map((k) => server.target('PUT', k));
    const body = randomBytes(4096);
    // Warm-up (JIT, WASM), as object-store.ts does before its measured runs.
    await runWrk({ origin, method: 'PUT', targets: puts, body, bodies: 'distinct', seconds: 4, connections: 16, threads: 1 });
    // The process's own background (timers, retries) over an idle stretch, subtracted from the run's CPU:
    // on a loaded host a run may do few PUTs, and that background would otherwise weigh on each.
    const idle0 = await threadCpu(child.pid!);
    const idleStart = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const idle1 = await threadCpu(child.pid!);
    const idleMs = performance.now() - idleStart;
    const before = await threadCpu(child.pid!);
    started = performance.now();
    const fig = await runWrk({ origin, method: 'PUT', targets: puts, body, bodies: 'distinct', seconds: SECONDS, connections: 16, threads: 1 });
    stopped = performance.now();
    const after = await threadCpu(child.pid!);
    const perPut = (ms: number) => (ms / Math.max(1, fig.requests)).toFixed(3);
    const deltas = [...after].map(([tid, a]) => ({ tid, name: a.name, ms: a.ms - (before.get(tid)?.ms ?? 0) })).sort((a, b) => b.ms - a.ms);
    // Each thread's CPU in the run less its idle rate over the run's length.
    const runMs = stopped - started;
    for (const d of deltas) d.ms -= (((idle1.get(d.tid)?.ms ?? 0) - (idle0.get(d.tid)?.ms ?? 0)) * runMs) / idleMs;
    const total = deltas.reduce((n, d) => n + d.ms, 0);
    const main = deltas.find((d) => d.tid === child.pid)?.ms ?? 0;
    const others = deltas.filter((d) => d.tid !== child.pid).slice(0, 2);
    console.log(
      `${serverRepo}: PUT 4 KiB ${fig.opsPerSec.toFixed(0)}/s (${fig.requests} PUTs), CPU ms per PUT less idle: process ${perPut(total)}, event loop ${perPut(main)}, ` +
        `${others.map((d) => `${d.name}#${d.tid} ${perPut(d.ms)}`).join(', ')}; load ${loadAverages()}`,
    );
  } finally {
    await stopAll([child]);
  }
  await server.exited;
  const end = performance.now();
  if (PROFILE) {
    for (const file of await profileFiles(profDir)) {
      const profile = await readProfile(path.join(profDir, file));
      const s = summarise(profile, (end - started) * 1000, (end - stopped) * 1000);
      if (s.busy < 100) continue;
      console.log(`\n${file}: ${s.busy} busy samples, ${((100 * s.idle) / (s.idle + s.busy)).toFixed(0)} % idle; by nearest project file:`);
      for (const [name, pct] of s.files.slice(0, TOP)) console.log(`${pct.toFixed(1).padStart(5)} %  ${name}`);
      console.log('self time:');
      for (const [name, pct] of s.self.slice(0, TOP)) console.log(`${pct.toFixed(1).padStart(5)} %  ${name}`);
    }
  }
  if (!process.env.BENCH_PROFILE_DIR) await rm(work, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
