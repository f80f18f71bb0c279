import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePorts, waitForPort } from './ports.js';
import { cleanUpAtExit, sharedPerRun, startWithRetries } from './throwaway.js';

const run = promisify(execFile);

export interface RedisClusterNode {
  host: string;
  port: number;
}

export interface RedisClusterHarness {
  /** The three masters, in slot order (first node owns slots 0..5460). */
  nodes: RedisClusterNode[];
  /** Kill the servers and remove their directories. Safe to call twice. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const MASTERS = 3;

/** Live harnesses, so that an exiting test process never leaves a redis-server behind. */
function killNow(entry: { procs: ChildProcess[]; dir: string }): void {
  for (const p of entry.procs) {
    if (p.exitCode === null && p.signalCode === null) {
      try {
        p.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  rmSync(entry.dir, { recursive: true, force: true });
}

async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', HOST, '-p', String(port), ...args], { timeout: 30_000 });
  return stdout;
}

async function waitClusterOk(ports: number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(ports.map((p) => redisCli(p, 'cluster', 'info').catch(() => '')));
    const ok = infos.every(
      (info) => /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${ports.length}\\b`).test(info),
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis cluster not ok after ${timeoutMs} ms:\n${infos.join('\n---\n')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startOnce(): Promise<RedisClusterHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-redis-cluster-'));
  const entry = { procs: [] as ChildProcess[], dir };
  const kill = cleanUpAtExit(() => killNow(entry));
  try {
    // Two ports per node: clients and the cluster bus (cluster-port), so that port+10000 need not be free.
    const ports = await freePorts(MASTERS * 2);
    const clientPorts = ports.slice(0, MASTERS);
    clientPorts.forEach((port, i) => {
      const args = [
        '--port', String(port),
        '--bind', HOST,
        '--cluster-enabled', 'yes',
        '--cluster-port', String(ports[MASTERS + i]),
        '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', '2000',
        '--dir', dir,
        '--save', '',
        '--appendonly', 'no',
        '--logfile', path.join(dir, `${port}.log`),
      ];
      const proc = spawn('redis-server', args, { stdio: 'ignore' });
      proc.on('error', () => undefined);
      entry.procs.push(proc);
    });
    await Promise.all(clientPorts.map((p) => waitForPort(p, HOST, 15_000)));
    await run(
      'redis-cli',
      ['--cluster', 'create', ...clientPorts.map((p) => `${HOST}:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: 60_000 },
    );
    await waitClusterOk(clientPorts, 30_000);
    let stopped: Promise<void> | undefined;
    return {
      nodes: clientPorts.map((port) => ({ host: HOST, port })),
      stop: () => {
        stopped ??= (async () => {
          await Promise.all(
            entry.procs.map(
              (p) =>
                new Promise<void>((resolve) => {
                  if (p.exitCode !== null || p.signalCode !== null) return resolve();
                  p.once('exit', () => resolve());
                  p.kill('SIGTERM');
                }),
            ),
          );
          kill();
        })();
        return stopped;
      },
    };
  } catch (err) {
    kill();
    throw err;
  }
}

/**
 * Start a private 3-master Redis Cluster (redis-server child processes, no persistence) and wait
 * until every node reports cluster_state:ok. Retries with new ports if one was taken meanwhile.
 */
export function startRedisCluster(): Promise<RedisClusterHarness> {
  return startWithRetries(startOnce, 3);
}

/**
 * The cluster shared by every test file of this mocha run: started on first use, stopped when the
 * process exits. Tests must not stop it (use startRedisCluster() for a cluster you may break) and
 * should use unique key prefixes.
 */
export const sharedRedisCluster = sharedPerRun(startRedisCluster);
