import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { REDIS_NODE_COUNT, redisClusterNodes, renderRedisCluster } from '../../controllers/bucket/render-redis-cluster.js';
import { freePorts, waitForPort } from '../support/ports.js';
import { eventually, type Doc } from './support/harness.js';

const run = promisify(execFile);

/**
 * The storage stack's cluster-create Job, its shell script run as the Job runs it, against six
 * empty cluster-mode redis-servers (three masters, a replica each) (the shards' DNS names swapped for their local addresses).
 */
describe('Redis Cluster create Job', function () {
  this.timeout(60_000);
  const procs: ChildProcess[] = [];
  let dir: string;
  let ports: number[];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-redis-job-'));
    const n = REDIS_NODE_COUNT;
    ports = await freePorts(2 * n);
    for (let i = 0; i < n; i++) {
      // prettier-ignore
      const proc = spawn('redis-server', [
        '--port', String(ports[i]), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-port', String(ports[n + i]),
        '--cluster-config-file', path.join(dir, `nodes-${i}.conf`), '--dir', dir, '--save', '', '--appendonly', 'no',
      ], { stdio: 'ignore' });
      proc.on('error', () => undefined);
      procs.push(proc);
    }
    await Promise.all(ports.slice(0, n).map((p) => waitForPort(p)));
  });
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('forms the cluster once, and exits at once when it is already formed', async () => {
    const job = renderRedisCluster('ns', []).find((o) => o.kind === 'Job') as Doc;
    const [shell, flag, script] = job.spec.template.spec.containers[0].command as string[];
    expect([shell, flag]).to.deep.equal(['sh', '-c']);
    let local = script!;
    redisClusterNodes('ns')
      .split(',')
      .forEach((node, i) => (local = local.split(node).join(`127.0.0.1:${ports[i]}`)));
    expect(local).to.not.contain('.svc');
    const first = await run('sh', ['-c', local], { timeout: 45_000 });
    expect(first.stdout).to.match(/All 16384 slots covered/);
    await eventually(
      async () => {
        const info = await run('redis-cli', ['-p', String(ports[0]), 'cluster', 'info']);
        expect(info.stdout)
          .to.match(/cluster_state:ok/)
          .and.match(/cluster_slots_assigned:16384/)
          .and.match(/cluster_size:3/)
          .and.match(/cluster_known_nodes:6/);
      },
      'cluster ok',
      30_000,
    );
    const again = await run('sh', ['-c', local], { timeout: 45_000 });
    expect(again.stdout).to.contain('cluster already formed');
  });
});
