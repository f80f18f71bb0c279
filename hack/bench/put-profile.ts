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
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { cleanEnv, ROOT, standaloneSettings, stopAll, waitReady } from './stacks.js';
import { checkTargets, runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const TOP = Number(process.env.BENCH_TOP ?? 25);
const PROFILE = process.env.BENCH_NO_PROFILE === undefined;
const KEYS = 1000;
const TICK_MS = 10; // /proc counts CPU time in 1/100 s
/** The idle stretch whose CPU is taken as the process's background. */
const IDLE_MS = 3000;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const serverRepo = path.resolve(process.env.BENCH_REPO ?? repo);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  endTime: number;
}

/** CPU ms (user + system) of each thread of `pid`, by thread id. */
async function threadCpu(pid: number): Promise<Map<number, { name: string; ms: number }>> {
  const out = new Map<number, { name: string; ms: number }>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(Number(tid), { name, ms: (Number(fields[11]) + Number(fields[12])) * TICK_MS });
  }
  return out;
}

const shortUrl = (url: string) =>
  url
    .replace(/^file:\/\//u, '')
    .replace(`${serverRepo}/`, '')
    .replace(/.*node_modules\//u, 'node_modules/');

/**
 * Busy samples of the last `fromEndUs` to `untilEndUs` µs of the profile: share by nearest project file
 * (images/…, else GC, else the first package or built-in on the stack) and self time by function.
 */
function summarise(
  profile: Profile,
  fromEndUs: number,
  untilEndUs: number,
): { busy: number; idle: number; files: Array<[string, number]>; self: Array<[string, number]> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const nearest = (id: number): string => {
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const url = shortUrl(byId.get(cur)!.callFrame.url);
      if (url.startsWith('images/')) return url;
    }
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === '(garbage collector)' || functionName === '(program)') return functionName;
    return `(no project frame) ${shortUrl(url).split('/').slice(0, 2).join('/') || functionName}`;
  };
  const files = new Map<string, number>();
  const self = new Map<string, number>();
  let t = profile.endTime;
  const times: number[] = [];
  for (let i = profile.timeDeltas.length - 1; i >= 0; i--) {
    times[i] = t;
    t -= profile.timeDeltas[i]!;
  }
  let busy = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const ago = profile.endTime - times[i]!;
    if (ago > fromEndUs || ago < untilEndUs) return;
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === '(idle)') {
      idle++;
      return;
    }
    busy++;
    const file = nearest(id);
    files.set(file, (files.get(file) ?? 0) + 1);
    const name = `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}`;
    self.set(name, (self.get(name) ?? 0) + 1);
  });
  const ranked = (m: Map<string, number>) => [...m].map(([k, n]): [string, number] => [k, (100 * n) / Math.max(1, busy)]).sort((a, b) => b[1] - a[1]);
  return { busy, idle, files: ranked(files), self: ranked(self) };
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-put-profile-'));
  const profDir = process.env.BENCH_PROFILE_DIR ?? path.join(work, 'prof');
  const settings = await standaloneSettings(path.join(work, 'strata'));
  const prof = PROFILE ? ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${profDir}`] : [];
  const child = spawn(process.execPath, [...prof, '--import', 'tsx', path.join(serverRepo, 'images/standalone/src/main.ts')], {
    cwd: serverRepo,
    env: cleanEnv(settings.env),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  let started = 0;
  let stopped = 0;
  try {
    const origin = `http://127.0.0.1:${settings.gatewayPort}`;
    await waitReady(origin, child);
    const target = (method: string, key: string) =>
      presignUrl({ method, origin, path: `/bench/${key}`, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 7200 }).slice(
        origin.length,
      );
    await checkTargets({ origin, method: 'PUT', targets: [target('PUT', '')] });
    const puts = Array.from({ length: KEYS }, (_, i) => target('PUT', `small/${i}.bin`));
    const body = randomBytes(4096);
    await checkTargets({ origin, method: 'PUT', targets: puts, body });
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
        `${others.map((d) => `${d.name}#${d.tid} ${perPut(d.ms)}`).join(', ')}; load ${os
          .loadavg()
          .map((n) => n.toFixed(1))
          .join(' ')}`,
    );
  } finally {
    await stopAll([child]);
  }
  await exited;
  const end = performance.now();
  if (PROFILE) {
    const files = (await readdir(profDir)).filter((f) => f.endsWith('.cpuprofile')).sort((a, b) => a.split('.')[4]!.localeCompare(b.split('.')[4]!));
    for (const file of files) {
      const profile = JSON.parse(await readFile(path.join(profDir, file), 'utf8')) as Profile;
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
