/**
 * Object-store benchmark (prints figures; not a test): 4 KiB GET/PUT ops/s with p50/p99 latency and
 * 256 MiB PUT/GET MiB/s through the standalone gateway (SigV4 presigned URLs), beside Debian's nginx
 * serving and accepting the same files, plus the standalone process's RSS idle and under load.
 *
 * Clients, the same for Strata and nginx: wrk (hack/bench/wrk.ts) for the 4 KiB runs and curl for the
 * 256 MiB transfers, both C and cheaper per request than either server. The 4 KiB runs go over
 * 1000 keys (one presigned URL per key and method, cycled); every 4 KiB PUT sends a body no PUT
 * before it sent, so that each stores new content and frees what it replaces (the headline PUT
 * figure). Each key is PUT and read back once before the runs (a 2xx required), and an error status
 * or socket error in any run fails the benchmark: figures of failed requests measure nothing.
 *
 *   npm run bench:object-store            (BENCH_SECONDS=10 BENCH_CONNECTIONS=16 by default)
 *   BENCH_SECONDS=3 npm run bench:object-store    (quick: about a minute in all)
 *
 *   BENCH_REPO=/path/to/other/checkout             (start the standalone process from that checkout: two commits, one client)
 *   BENCH_WRK_THREADS=2                            (wrk threads; default 2, one per core of this machine)
 *   BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'  (extra node flags for the standalone process)
 *   BENCH_CHILD_STDOUT=/tmp/child.log              (the standalone process's stdout to that file, e.g. with BENCH_NODE_ARGS=--trace-gc)
 *   BENCH_ONLY=small | small-get | small-put | big  (only the 4 KiB runs, one of them, or the 256 MiB transfers)
 *   STRATA_IN_PROCESS_HTTP=0                       (the gateway reaches the data plane over loopback TCP, as before ADR 0002)
 *   BENCH_PUT_BODIES=one                           (every 4 KiB PUT sends the same body: each then shares one stored blob)
 *
 * Beside each figure it prints the standalone process's CPU time per request (4 KiB) or per MiB
 * (256 MiB) from /proc (utime + stime), and the client's: unlike ops/s, that survives a loaded machine.
 *
 * The standalone process runs the object store only (STRATA_DISABLED_SERVICES turns the AI services
 * off; they would otherwise share its event loop and memory). The load average is printed before and
 * after: on a shared machine the figures are only comparable within one run.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { freePort } from '../../test/support/ports.js';
import { startNginx } from './nginx-baseline.js';
import { ROOT, standaloneSettings } from './stacks.js';
import { curlTransfer } from './transfer.js';
import { checkTargets, childrenCpuMs, runWrk, type WrkFigure } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const PUT_BODIES = process.env.BENCH_PUT_BODIES === 'one' ? 'one' : 'distinct';
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const WRK_THREADS = Number(process.env.BENCH_WRK_THREADS ?? 2);
/** Keys of the 4 KiB runs. */
const KEYS = 1000;
const BIG = 256 * 1024 * 1024;
const SMALL = 4096;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The checkout whose standalone process is measured (the client is always this one's). */
const serverRepo = path.resolve(process.env.BENCH_REPO ?? repo);

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

const TICK_MS = 10; // /proc/<pid>/stat counts CPU time in clock ticks (USER_HZ = 100 on Linux)

/** CPU time (user + system) a process has used so far, in ms. */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** Run `f` and return its result with the CPU ms that `pid` and the client (wrk or curl, exited meanwhile) spent. */
async function measured<T>(pid: number, f: () => Promise<T>): Promise<{ value: T; serverMs: number; clientMs: number }> {
  const s0 = await cpuMs(pid);
  const k0 = await childrenCpuMs();
  const value = await f();
  return { value, serverMs: (await cpuMs(pid)) - s0, clientMs: (await childrenCpuMs()) - k0 };
}

async function waitFor(url: string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not become ready`);
}

async function writeRandomFile(file: string, bytes: number): Promise<void> {
  const out = createWriteStream(file);
  for (let left = bytes; left > 0; left -= 1 << 20) {
    if (!out.write(randomBytes(Math.min(left, 1 << 20)))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-bench-'));
  const [standalone, nginxPort] = [await standaloneSettings(path.join(work, 'data')), await freePort()];
  const gwPort = standalone.gatewayPort;
  const loadBefore = os.loadavg();
  const origin = `http://127.0.0.1:${gwPort}`;
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []), '--import', 'tsx', path.join(serverRepo, 'images/standalone/src/main.ts')],
    {
      cwd: serverRepo,
      env: {
        ...process.env,
        ...standalone.env,
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      },
      stdio: ['ignore', process.env.BENCH_CHILD_STDOUT ? openSync(process.env.BENCH_CHILD_STDOUT, 'w') : 'ignore', 'inherit'],
    },
  );
  const nginx = await startNginx(work, nginxPort);
  let peakRss = 0;
  // The peak per phase too: which load sets the process's peak.
  let phase = 'start';
  const phasePeaks = new Map<string, number>();
  const sampler = setInterval(() => {
    rssMiB(child.pid!).then(
      (v) => {
        peakRss = Math.max(peakRss, v);
        phasePeaks.set(phase, Math.max(phasePeaks.get(phase) ?? 0, v));
      },
      () => undefined,
    );
  }, 200);
  try {
    await waitFor(`${origin}/readyz`);
    const sign = (method: string, key: string, expires = 3600) =>
      presignUrl({ method, origin, path: `/bench/${key}`, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: expires });
    const bucketUrl = presignUrl({
      method: 'PUT',
      origin,
      path: '/bench',
      accessKey: ROOT.user,
      secret: ROOT.password,
      region: 'us-east-1',
      expiresSeconds: 60,
    });
    if (!(await fetch(bucketUrl, { method: 'PUT' })).ok) throw new Error('could not create the bench bucket');
    const relative = (u: string) => u.slice(origin.length);

    const only = process.env.BENCH_ONLY ?? 'all';
    const pid = child.pid!;
    const f1 = (n: number) => n.toFixed(1);
    const f2 = (n: number) => n.toFixed(2);
    const f3 = (n: number) => n.toFixed(3);
    const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
    const rows: string[] = [];
    const goals: string[] = [];
    const cpuLines: string[] = [];
    await new Promise((r) => setTimeout(r, 2000));
    const idleRss = await rssMiB(pid);
    peakRss = idleRss;

    if (only !== 'big') {
      const keys = Array.from({ length: KEYS }, (_, i) => `small/${i}.bin`);
      const sides = [
        { origin, get: keys.map((k) => relative(sign('GET', k))), put: keys.map((k) => relative(sign('PUT', k))) },
        { origin: nginx.url, get: keys.map((k) => `/${k}`), put: keys.map((k) => `/${k}`) },
      ];
      const small = randomBytes(SMALL);
      const load = (side: (typeof sides)[number], method: 'GET' | 'PUT', seconds = SECONDS) =>
        runWrk({
          origin: side.origin,
          method,
          targets: side[method === 'GET' ? 'get' : 'put'],
          body: method === 'PUT' ? small : undefined,
          bodies: PUT_BODIES,
          seconds,
          connections: CONNECTIONS,
          threads: WRK_THREADS,
        });
      for (const side of sides) {
        await checkTargets({ origin: side.origin, method: 'PUT', targets: side.put, body: small });
        await checkTargets({ origin: side.origin, method: 'GET', targets: side.get, expectBytes: SMALL });
      }
      // Warm up both (JIT, connection pools, caches) before measuring: without it the measured PUTs
      // ran while V8 was still optimising the write path's JavaScript and PGlite's WebAssembly.
      for (const side of sides) {
        await load(side, 'GET', 2);
        if (only !== 'small-get') await load(side, 'PUT', 4);
      }

      const none = { opsPerSec: 0, requests: 0, ok: 0, errors: 0, p50: 0, p99: 0, clientCpuMs: 0 };
      const skipped = { value: none, serverMs: 0, clientMs: 0 };
      phase = 'GET 4 KiB';
      const gwGet = only === 'small-put' ? skipped : await measured(pid, () => load(sides[0]!, 'GET'));
      const ngGet = only === 'small-put' ? none : await load(sides[1]!, 'GET');
      phase = 'PUT 4 KiB';
      const gwPut = only === 'small-get' ? skipped : await measured(pid, () => load(sides[0]!, 'PUT'));
      const ngPut = only === 'small-get' ? none : await load(sides[1]!, 'PUT');
      const ops = (f: WrkFigure) => `${Math.round(f.opsPerSec)} ops/s (p50 ${f2(f.p50)} ms, p99 ${f2(f.p99)} ms; client ${f3(f.clientCpuMs)} CPU ms/request)`;
      const line = (name: string, g: WrkFigure, n: WrkFigure) => `| ${name} | ${ops(g)} | ${ops(n)} | ${f2(g.opsPerSec / n.opsPerSec)}× |`;
      rows.push(line('GET 4 KiB', gwGet.value, ngGet), line('PUT 4 KiB', gwPut.value, ngPut));
      const perOp = (m: { value: WrkFigure; serverMs: number }) => f2(m.serverMs / Math.max(1, m.value.requests));
      cpuLines.push(`standalone CPU per request: GET 4 KiB ${perOp(gwGet)} ms, PUT 4 KiB ${perOp(gwPut)} ms (ops/s on an idle core ≈ 1000 ÷ that)`);
      goals.push(`  GET 4 KiB >= 6000 ops/s: ${met(gwGet.value.opsPerSec >= 6000)}; PUT 4 KiB >= 2500 ops/s: ${met(gwPut.value.opsPerSec >= 2500)}`);
    }

    if (only === 'all' || only === 'big') {
      const bigFile = path.join(work, 'big.bin');
      await writeRandomFile(bigFile, BIG);
      type Run = Awaited<ReturnType<typeof measured<number>>>;
      const runs: string[] = [];
      // Two rounds of Strata then nginx, alternating (the host's state drifts: dirty pages, other tenants),
      // best of each side; the CPU figures are those of the best run. Every run is printed.
      const bestPairs = async (name: string, strata: () => Promise<number>, nginxRun: () => Promise<number>) => {
        const s: Run[] = [];
        const n: Run[] = [];
        for (let round = 0; round < 2; round++) {
          s.push(await measured(pid, strata));
          n.push(await measured(pid, nginxRun));
        }
        const fastest = (r: Run[]) => r.reduce((a, b) => (b.value > a.value ? b : a));
        runs.push(`${name} runs (MiB/s, in order): Strata ${s.map((r) => f1(r.value)).join(' / ')}; nginx ${n.map((r) => f1(r.value)).join(' / ')}`);
        return [fastest(s), fastest(n)] as const;
      };
      const put = (url: string) => curlTransfer('PUT', url, BIG, bigFile);
      const get = (url: string) => curlTransfer('GET', url, BIG);
      phase = 'PUT 256 MiB';
      // One unmeasured PUT each first (as the 4 KiB PUTs are warmed up): the first large upload of a
      // process compiles its path and takes its buffers; steady-state uploads are what is compared.
      await put(sign('PUT', 'big.bin'));
      await put(`${nginx.url}/big.bin`);
      const [gwBigPut, ngBigPut] = await bestPairs(
        'PUT 256 MiB',
        () => put(sign('PUT', 'big.bin')),
        () => put(`${nginx.url}/big.bin`),
      );
      phase = 'GET 256 MiB';
      const [gwBigGet, ngBigGet] = await bestPairs(
        'GET 256 MiB',
        () => get(sign('GET', 'big.bin')),
        () => get(`${nginx.url}/big.bin`),
      );
      const big = (name: string, g: number, n: number) => `| ${name} | ${f1(g)} MiB/s | ${f1(n)} MiB/s | ${f2(g / n)}× |`;
      rows.push(big('GET 256 MiB', gwBigGet.value, ngBigGet.value), big('PUT 256 MiB', gwBigPut.value, ngBigPut.value));
      const mib = BIG / 1048576;
      const perMiB = (m: { serverMs: number; clientMs: number }) => `${f2(m.serverMs / mib)} ms/MiB (client ${f2(m.clientMs / mib)})`;
      cpuLines.push(
        ...runs,
        `standalone CPU per MiB: GET 256 MiB ${perMiB(gwBigGet)}, PUT 256 MiB ${perMiB(gwBigPut)}; nginx runs' client (curl): GET ` +
          `${f2(ngBigGet.clientMs / mib)}, PUT ${f2(ngBigPut.clientMs / mib)} ms/MiB`,
      );
      goals.push(
        `  GET 256 MiB >= 0.8x nginx: ${met(gwBigGet.value >= 0.8 * ngBigGet.value)}; PUT 256 MiB >= 0.9x nginx: ` +
          `${met(gwBigPut.value >= 0.9 * ngBigPut.value)}`,
      );
    }

    const loadAfter = os.loadavg();
    goals.push(`  RSS < 512 MiB idle and under load: ${met(idleRss < 512 && peakRss < 512)}`);
    console.log(
      [
        '',
        `Strata object store vs nginx — ${os.cpus().length} cores, loopback, ${CONNECTIONS} connections, ${SECONDS} s per run, SigV4 presigned ` +
          `requests, wrk (${WRK_THREADS} threads) and curl, ${process.env.BENCH_REPO ? `standalone from ${serverRepo}, ` : ''}gateway → data plane ` +
          `${process.env.STRATA_IN_PROCESS_HTTP === '0' ? 'over loopback TCP (STRATA_IN_PROCESS_HTTP=0)' : 'in-process'}, 4 KiB PUTs over ${KEYS} ` +
          `keys, bodies: ${PUT_BODIES === 'distinct' ? 'a different one per PUT' : 'one for all (BENCH_PUT_BODIES=one)'}`,
        `load average (1, 5, 15 min) ${loadBefore.map(f1).join(' ')} before, ${loadAfter.map(f1).join(' ')} after`,
        '',
        '| operation | Strata gateway (standalone) | nginx | ratio |',
        '|---|---|---|---|',
        ...rows,
        '',
        ...cpuLines,
        `standalone RSS: idle ${f1(idleRss)} MiB, peak under load ${f1(peakRss)} MiB (${[...phasePeaks]
          .filter(([name]) => name !== 'start')
          .map(([name, v]) => `${name} ${f1(v)}`)
          .join(', ')})`,
        '',
        'targets (issue 2):',
        ...goals,
        '',
      ].join('\n'),
    );
  } finally {
    clearInterval(sampler);
    await nginx.stop();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
