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
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { cleanEnv, cpuSeconds, ROOT, standaloneSettings, stopAll, waitReady } from './stacks.js';
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

async function mainThreadSeconds(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8').catch(() => '');
  if (!stat) return 0;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function misses(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  return Number(/^strata_cache_misses_total\{[^}]*cache="gateway-objects"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
}

async function start(name: string, serverRepo: string, work: string): Promise<Server> {
  const settings = await standaloneSettings(path.join(work, name));
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(serverRepo, 'images/standalone/src/main.ts')], {
    cwd: serverRepo,
    env: cleanEnv(settings.env),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
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
  await checkTargets({ origin, method: 'GET', targets: gets.slice(0, 10), expectBytes: 4096 });
  return { name, child, origin, gets, runs: [] };
}

async function measure(s: Server): Promise<void> {
  // Every key read once first: answers kept more than 30 s ago (while the other server ran) are kept anew,
  // so that fewer runs meet a burst of expiries (the rest still expire on their own schedule).
  await checkTargets({ origin: s.origin, method: 'GET', targets: s.gets, expectBytes: 4096 });
  await runWrk({ origin: s.origin, method: 'GET', targets: s.gets, seconds: 1, connections: 16, threads: 1 });
  const [cpu0, main0, miss0] = [await cpuSeconds(s.child.pid), await mainThreadSeconds(s.child.pid), await misses(s.origin)];
  const fig = await runWrk({ origin: s.origin, method: 'GET', targets: s.gets, seconds: SECONDS, connections: 16, threads: 1 });
  const [cpu, main, miss] = [await cpuSeconds(s.child.pid), await mainThreadSeconds(s.child.pid), await misses(s.origin)];
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
