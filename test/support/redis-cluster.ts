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
  /** The three masters, in slot order (first node owns slots 0..5460), as created. */
  nodes: RedisClusterNode[];
  /** Their replicas (one per master, or none), as created. */
  replicas: RedisClusterNode[];
  /** The redis-server process of a node (to kill or pause it). */
  processOf(node: RedisClusterNode): ChildProcess;
  /** Start a node's server again after it was killed (as its pod would be): same port, files and cluster config. */
  restart(node: RedisClusterNode): Promise<void>;
  /** Kill the servers and remove their directories. Safe to call twice. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /**
   * One replica per master, and every node with AOF (appendonly, fsynced before each reply): the production
   * layout, where a master's failure promotes its replica. Default false: 3 masters, no persistence.
   */
  withReplicas?: boolean;
  /**
   * cluster-node-timeout, ms: how long a master may be silent before its replica takes over. Short for
   * failover tests (default 2000); the shared cluster waits longer, so that a loaded machine's pauses
   * never promote a replica under tests that expect the layout as created.
   */
  nodeTimeoutMs?: number;
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

/** Every replica's link to its master is up and its initial sync is done. */
async function waitReplicasInSync(ports: number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(ports.map((p) => redisCli(p, 'info', 'replication').catch(() => '')));
    if (infos.every((info) => /master_link_status:up/.test(info) && /master_sync_in_progress:0/.test(info))) return;
    if (Date.now() > deadline) throw new Error(`redis replicas not in sync after ${timeoutMs} ms:\n${infos.join('\n---\n')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function waitClusterOk(ports: number[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(ports.map((p) => redisCli(p, 'cluster', 'info').catch(() => '')));
    const ok = infos.every((info) => /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${ports.length}\\b`).test(info));
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis cluster not ok after ${timeoutMs} ms:\n${infos.join('\n---\n')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface ClusterRoles {
  masters: { port: number; firstSlot: number }[];
  replicaPorts: number[];
}

/** The masters (in slot order) and replicas as one node sees them, once it sees exactly the expected counts. */
async function waitForRoles(port: number, masterCount: number, replicaCount: number, timeoutMs: number): Promise<ClusterRoles> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const roles = (await redisCli(port, 'cluster', 'nodes'))
      .trim()
      .split('\n')
      .map((line) => {
        const [, address, flags, , , , , , ...slots] = line.split(' ');
        return {
          port: Number(address!.split('@')[0]!.split(':')[1]),
          master: flags!.includes('master'),
          firstSlot: slots.length > 0 ? Number(slots[0]!.split('-')[0]) : Number.NaN,
        };
      });
    const masters = roles.filter((r) => r.master && !Number.isNaN(r.firstSlot)).sort((a, b) => a.firstSlot - b.firstSlot);
    const replicaPorts = roles.filter((r) => !r.master).map((r) => r.port);
    if (masters.length === masterCount && replicaPorts.length === replicaCount && roles.length === masterCount + replicaCount) {
      return { masters, replicaPorts };
    }
    if (Date.now() > deadline) throw new Error(`redis cluster roles not settled after ${timeoutMs} ms:\n${JSON.stringify(roles)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startOnce(opts: RedisClusterOptions): Promise<RedisClusterHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-redis-cluster-'));
  const entry = { procs: [] as ChildProcess[], dir };
  const kill = cleanUpAtExit(() => killNow(entry));
  const count = opts.withReplicas ? MASTERS * 2 : MASTERS;
  try {
    // Two ports per node: clients and the cluster bus (cluster-port), so that port+10000 need not be free.
    const ports = await freePorts(count * 2);
    const clientPorts = ports.slice(0, count);
    const argsOf = new Map<number, string[]>();
    const spawnNode = (port: number, index: number) => {
      const proc = spawn('redis-server', argsOf.get(port)!, { stdio: 'ignore' });
      proc.on('error', () => undefined);
      entry.procs[index] = proc;
    };
    clientPorts.forEach((port, i) => {
      const args = [
        '--port',
        String(port),
        '--bind',
        HOST,
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(ports[count + i]),
        '--cluster-config-file',
        path.join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        String(opts.nodeTimeoutMs ?? 2000),
        '--dir',
        dir,
        '--save',
        '',
        ...(opts.withReplicas
          ? ['--appendonly', 'yes', '--appendfsync', 'always', '--appendfilename', `appendonly-${port}.aof`, '--appenddirname', `aof-${port}`]
          : ['--appendonly', 'no']),
        '--logfile',
        path.join(dir, `${port}.log`),
      ];
      argsOf.set(port, args);
      spawnNode(port, i);
    });
    await Promise.all(clientPorts.map((p) => waitForPort(p, HOST, 15_000)));
    await run(
      'redis-cli',
      ['--cluster', 'create', ...clientPorts.map((p) => `${HOST}:${p}`), '--cluster-replicas', opts.withReplicas ? '1' : '0', '--cluster-yes'],
      { timeout: 60_000 },
    );
    await waitClusterOk(clientPorts, 30_000);
    // Roles as created: masters in slot order, then the replicas. `--cluster create` makes the replicas
    // with CLUSTER REPLICATE after the meet, so a node may still be gossiped as a master without slots:
    // read until every node is seen in its final role.
    const { masters, replicaPorts } = await waitForRoles(clientPorts[0]!, MASTERS, count - MASTERS, 30_000);
    if (replicaPorts.length > 0) await waitReplicasInSync(replicaPorts, 30_000);
    let stopped: Promise<void> | undefined;
    return {
      nodes: masters.map(({ port }) => ({ host: HOST, port })),
      replicas: replicaPorts.map((port) => ({ host: HOST, port })),
      processOf: (node) => entry.procs[clientPorts.indexOf(node.port)]!,
      restart: async (node) => {
        const index = clientPorts.indexOf(node.port);
        const old = entry.procs[index]!;
        if (old.exitCode === null && old.signalCode === null) throw new Error(`redis node ${node.port} is still running`);
        spawnNode(node.port, index);
        await waitForPort(node.port, HOST, 15_000);
      },
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
 * Start a private Redis Cluster of 3 masters (redis-server child processes; see RedisClusterOptions
 * for replicas and persistence) and wait until every node reports cluster_state:ok and every replica
 * is in sync. Retries with new ports if one was taken meanwhile.
 */
export function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterHarness> {
  return startWithRetries(() => startOnce(opts), 3);
}

/**
 * The cluster shared by every test file of this mocha run, laid out as in production (3 masters, each
 * with a replica, AOF on): started on first use, stopped when the
 * process exits. Tests must not stop it (use startRedisCluster() for a cluster you may break) and
 * should use unique key prefixes.
 */
export const sharedRedisCluster = sharedPerRun(() => startRedisCluster({ withReplicas: true, nodeTimeoutMs: 15_000 }));
