/**
 * The object store's stacks for hack/bench/object-store-stack.ts: the standalone process, or the three
 * service entrypoints as separate processes against real servers, and the CPU each process used.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { freePort } from '../../test/support/ports.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CPU_PROF = process.env.BENCH_CPU_PROF;
/** The root user of every stack the benchmark starts. */
export const ROOT = { user: 'strata', password: 'strata-bench-password' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TICK_S = 0.01; // USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

/**
 * The standalone process's settings for a benchmark: every service on a free loopback port, its data
 * under `dataDir`, the AI services off (they would share its event loop and memory), no purge, the
 * benchmark's root user. Spread into the process's environment; `gatewayPort` is where S3 answers.
 */
export async function standaloneSettings(dataDir: string): Promise<{ env: Record<string, string>; gatewayPort: number }> {
  const [gateway, dataPlane, controlPlane, modelServer, poemApp, imageSearch] = await Promise.all(Array.from({ length: 6 }, () => freePort()));
  return {
    gatewayPort: gateway!,
    env: {
      // As `npm start` sets it (package.json): fewer glibc malloc arenas for the process's threads.
      MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
      STRATA_DATA_DIR: dataDir,
      STRATA_HOST: '127.0.0.1',
      STRATA_GATEWAY_PORT: String(gateway),
      STRATA_DATA_PLANE_PORT: String(dataPlane),
      STRATA_CONTROL_PLANE_PORT: String(controlPlane),
      STRATA_MODEL_SERVER_PORT: String(modelServer),
      STRATA_POEM_APP_PORT: String(poemApp),
      STRATA_IMAGE_SEARCH_PORT: String(imageSearch),
      STRATA_DISABLED_SERVICES: process.env.STRATA_DISABLED_SERVICES ?? 'model-server,poem-app,image-search',
      STRATA_PURGE_SCHEDULE: 'off',
      STRATA_ROOT_USER: ROOT.user,
      STRATA_ROOT_PASSWORD: ROOT.password,
    },
  };
}

/** Environment without the caller's STRATA_* settings, so that each stack gets exactly what it is given. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STRATA_')));
  return { ...base, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn', ...extra };
}

/**
 * `file` of checkout `opts.repo` (default this one) run by Node with tsx, in that checkout; `opts.nodeArgs`
 * (default: a CPU profile where BENCH_CPU_PROF names a folder) go before it.
 */
export function spawnEntrypoint(file: string, env: NodeJS.ProcessEnv, opts: { repo?: string; nodeArgs?: string[] } = {}): ChildProcess {
  const cwd = opts.repo ?? repo;
  const nodeArgs = opts.nodeArgs ?? (CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(CPU_PROF)}`] : []);
  return spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(cwd, file)], { cwd, env, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
export async function cpuSeconds(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_S; // utime, stime
  } catch {
    return 0;
  }
}

/**
 * CPU seconds of the stack's processes and of the PostgreSQL backends connected to the bench
 * database, per pid, so that a delta counts only processes alive at both ends (pools keep theirs).
 */
export async function cpuSnapshot(
  stack: Stack,
  admin: pg.Client,
): Promise<{ stack: Map<number, number>; pg: Map<number, number>; rabbit: Map<number, number> }> {
  const pids = (await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows.map(
    (r) => r.pid,
  );
  const snap = { stack: new Map<number, number>(), pg: new Map<number, number>(), rabbit: new Map<number, number>() };
  for (const child of stack.children) if (child.pid) snap.stack.set(child.pid, await cpuSeconds(child.pid));
  for (const pid of pids) snap.pg.set(pid, await cpuSeconds(pid));
  for (const pid of await rabbitPids()) snap.rabbit.set(pid, await cpuSeconds(pid));
  return snap;
}

/** The machine's RabbitMQ server (beam.smp): shared with other users, so its figure is only indicative. */
export async function rabbitPids(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = await readFile(`/proc/${entry}/comm`, 'utf8').catch(() => '');
    if (comm.trim() === 'beam.smp') pids.push(Number(entry));
  }
  return pids;
}

export function cpuDelta(a: Map<number, number>, b: Map<number, number>): number {
  let total = 0;
  for (const [pid, end] of b) total += end - (a.get(pid) ?? end);
  return total;
}

/** Polls `url` every 200 ms until it answers 2xx (true) or `ms` have passed (false); `check` throws once its process is gone. */
export async function answersOk(url: string, ms: number, check: () => void): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    check();
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return true;
    await sleep(200);
  }
  return false;
}

export async function waitReady(url: string, child: ChildProcess, ms = 90_000): Promise<void> {
  const exited = () => {
    if (child.exitCode !== null) throw new Error(`${url}: the process exited with ${child.exitCode}`);
  };
  if (!(await answersOk(`${url}/readyz`, ms, exited))) throw new Error(`${url} did not become ready`);
}

export async function stopAll(children: ChildProcess[]): Promise<void> {
  for (const child of [...children].reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
  }
}

export interface Stack {
  origin: string;
  children: ChildProcess[];
  stop(): Promise<void>;
}

/** What the real stack needs: the servers, and RabbitMQ reached through a fault proxy. */
export interface RealServers {
  pgUrl: string;
  replicaUrls: string[];
  redisNodes: string;
  amqpUrl: string;
  exchange: string;
  queuePrefix: string;
  keyPrefix: string;
}

export async function startStandalone(work: string, real?: RealServers): Promise<Stack> {
  const [gw, dp, cp] = [await freePort(), await freePort(), await freePort()];
  const child = spawnEntrypoint(
    'images/standalone/src/main.ts',
    cleanEnv({
      STRATA_DATA_DIR: path.join(work, real ? 'data-real' : 'data-embedded'),
      STRATA_HOST: '127.0.0.1',
      STRATA_GATEWAY_PORT: String(gw),
      STRATA_DATA_PLANE_PORT: String(dp),
      STRATA_CONTROL_PLANE_PORT: String(cp),
      STRATA_DISABLED_SERVICES: 'model-server,poem-app,image-search',
      STRATA_ROOT_USER: ROOT.user,
      STRATA_ROOT_PASSWORD: ROOT.password,
      STRATA_PURGE_SCHEDULE: 'off',
      ...(real ? realEnv(real) : {}),
    }),
  );
  const origin = `http://127.0.0.1:${gw}`;
  await waitReady(origin, child);
  return { origin, children: [child], stop: () => stopAll([child]) };
}

export function realEnv(real: RealServers): Record<string, string> {
  return {
    STRATA_PG_URL: real.pgUrl,
    ...(real.replicaUrls.length ? { STRATA_PG_REPLICA_URLS: real.replicaUrls.join(',') } : {}),
    STRATA_REDIS_NODES: real.redisNodes,
    STRATA_REDIS_KEY_PREFIX: real.keyPrefix,
    STRATA_AMQP_URL: real.amqpUrl,
    STRATA_AMQP_EXCHANGE: real.exchange,
    STRATA_AMQP_QUEUE_PREFIX: real.queuePrefix,
  };
}

/** The three service containers' entrypoints as separate processes (the production topology). */
export async function startServices(work: string, real: RealServers): Promise<Stack> {
  const [gw, dp, cp] = [await freePort(), await freePort(), await freePort()];
  const token = randomBytes(16).toString('hex');
  const children: ChildProcess[] = [];
  try {
    const cpUrl = `http://127.0.0.1:${cp}`;
    const dpUrl = `http://127.0.0.1:${dp}`;
    const control = spawnEntrypoint(
      'images/control-plane/src/main.ts',
      cleanEnv({
        ...realEnv(real),
        PORT: String(cp),
        STRATA_INTERNAL_TOKEN: token,
        STRATA_SECRET_KEY: randomBytes(24).toString('hex'),
        STRATA_ROOT_USER: ROOT.user,
        STRATA_ROOT_PASSWORD: ROOT.password,
        STRATA_DATA_PLANE_URL: dpUrl,
      }),
    );
    children.push(control);
    await waitReady(cpUrl, control);
    const data = spawnEntrypoint(
      'images/data-plane/src/main.ts',
      cleanEnv({ ...realEnv(real), PORT: String(dp), STRATA_INTERNAL_TOKEN: token, STRATA_DATA_DIR: path.join(work, 'data-services') }),
    );
    children.push(data);
    await waitReady(dpUrl, data);
    const gateway = spawnEntrypoint(
      'images/gateway/src/main.ts',
      cleanEnv({
        STRATA_GATEWAY_PORT: String(gw),
        STRATA_GATEWAY_HOST: '127.0.0.1',
        STRATA_CONTROL_PLANE_URL: cpUrl,
        STRATA_DATA_PLANE_URL: dpUrl,
        STRATA_INTERNAL_TOKEN: token,
        STRATA_JWT_SECRET: randomBytes(24).toString('hex'),
        STRATA_ROOT_USER: ROOT.user,
        STRATA_REDIS_NODES: real.redisNodes,
        STRATA_REDIS_KEY_PREFIX: real.keyPrefix,
      }),
    );
    children.push(gateway);
    const origin = `http://127.0.0.1:${gw}`;
    await waitReady(origin, gateway);
    return { origin, children, stop: () => stopAll(children) };
  } catch (err) {
    await stopAll(children);
    throw err;
  }
}

/** Does the standalone platform read the production env (STRATA_PG_URL...) yet? */
export async function standaloneReadsProductionEnv(): Promise<boolean> {
  const platform = await readFile(path.join(repo, 'images/standalone/src/platform.ts'), 'utf8');
  return /pgUrl|createProductionSql|productionSettings/.test(platform);
}
