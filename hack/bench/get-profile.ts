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
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { cleanEnv, cpuSeconds, ROOT, standaloneSettings, stopAll, waitReady } from './stacks.js';
import { checkTargets, runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const TOP = Number(process.env.BENCH_TOP ?? 40);
const PROFILE = process.env.BENCH_NO_PROFILE === undefined;
const PUT_SECONDS = Number(process.env.BENCH_PUT_SECONDS ?? 0);
const KEYS = 1000;
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

/**
 * Self time per function (name, file, line), in percent of the samples taken in the last `fromEndUs`
 * to `untilEndUs` microseconds of the profile (the load run: not the start, the setup or the stop),
 * largest first.
 */
function selfTimes(profile: Profile, fromEndUs: number, untilEndUs: number): Array<[string, number]> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map<string, number>();
  const times: number[] = [];
  let t = profile.endTime;
  for (let i = profile.timeDeltas.length - 1; i >= 0; i--) {
    times[i] = t;
    t -= profile.timeDeltas[i]!;
  }
  let total = 0;
  profile.samples.forEach((id, i) => {
    const ago = profile.endTime - times[i]!;
    if (ago > fromEndUs || ago < untilEndUs) return;
    total++;
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const file = url.replace(/^file:\/\//u, '').replace(`${repo}/`, '');
    const name = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
    counts.set(name, (counts.get(name) ?? 0) + 1);
  });
  return [...counts].map(([k, n]): [string, number] => [k, (100 * n) / total]).sort((a, b) => b[1] - a[1]);
}

/** The gateway's kept-answer lookups so far (its metrics). */
async function answerLookups(origin: string): Promise<{ hits: number; misses: number }> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const count = (name: string) => Number(new RegExp(`^${name}\\{[^}]*cache="gateway-objects"[^}]*\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { hits: count('strata_cache_hits_total'), misses: count('strata_cache_misses_total') };
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

/** CPU seconds of the process's main thread (the event loop; the process's figure adds GC helpers and workers). */
async function mainThreadSeconds(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8').catch(() => '');
  if (!stat) return 0;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in USER_HZ ticks
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-get-profile-'));
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
    const keys = Array.from({ length: KEYS }, (_, i) => `small/${i}.bin`);
    await checkTargets({ origin, method: 'PUT', targets: keys.map((k) => target('PUT', k)), body: randomBytes(4096) });
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
        `load ${os
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
    // The main thread's profile (worker threads write their own, numbered after it).
    const files = (await readdir(profDir)).filter((f) => f.endsWith('.cpuprofile')).sort((a, b) => a.split('.')[4]!.localeCompare(b.split('.')[4]!));
    const profile = JSON.parse(await readFile(path.join(profDir, files[0]!), 'utf8')) as Profile;
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
