import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { REDIS_NODE_COUNT, redisClusterNodes, redisStartScript, renderRedisCluster } from '../../controllers/bucket/render-redis-cluster.js';
import { z } from 'zod';
import { createProductionCache, productionEnvShape, productionSettings } from '../../images/service-kit/src/index.js';
import { freePorts, waitForPort } from '../support/ports.js';
import { eventually, type Doc } from './support/harness.js';

const run = promisify(execFile);
const PASSWORD = 'job-test-password';

/**
 * The storage stack's cluster-create Job, its shell script run as the Job runs it, against six
 * cluster-mode redis-servers that require a password (three masters, a replica each) (the shards'
 * DNS names swapped for their local addresses), each started by the node container's own command.
 */
describe('Redis Cluster create Job', function () {
  this.timeout(90_000);
  const procs: ChildProcess[] = [];
  let dir: string;
  let ports: number[];
  const auth = { ...process.env, REDISCLI_AUTH: PASSWORD };
  const cli = async (i: number, ...args: string[]) => (await run('redis-cli', ['-p', String(ports[i]), ...args], { env: auth })).stdout;

  /** The Job's script with the shards' DNS names replaced by the local servers. */
  function localJobScript(): string {
    const job = renderRedisCluster('ns', [], { thirdPartyRegistry: '' }).find((o) => o.kind === 'Job') as Doc;
    const container = job.spec.template.spec.containers[0];
    expect(container.env).to.deep.equal([
      { name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: 'strata-redis-credentials', key: 'STRATA_REDIS_PASSWORD' } } },
    ]);
    const [shell, flag, script] = container.command as string[];
    expect([shell, flag]).to.deep.equal(['sh', '-c']);
    let local = script!;
    redisClusterNodes('ns')
      .split(',')
      .forEach((node, i) => (local = local.split(node).join(`127.0.0.1:${ports[i]}`)));
    expect(local).to.not.contain('.svc');
    return local;
  }

  async function expectWholeCluster(): Promise<void> {
    await eventually(
      async () => {
        for (let i = 0; i < REDIS_NODE_COUNT; i++) {
          expect(await cli(i, 'cluster', 'info'))
            .to.match(/cluster_state:ok/)
            .and.match(/cluster_slots_assigned:16384/)
            .and.match(/cluster_size:3/)
            .and.match(/cluster_known_nodes:6/);
        }
        expect((await cli(0, 'cluster', 'nodes')).match(/slave/g)).to.have.length(3);
      },
      'cluster ok',
      30_000,
    );
  }

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-redis-job-'));
    const n = REDIS_NODE_COUNT;
    ports = await freePorts(2 * n);
    const node = (renderRedisCluster('ns', [], { thirdPartyRegistry: '' }).find((o) => o.kind === 'StatefulSet') as Doc).spec.template.spec.containers[0];
    for (let i = 0; i < n; i++) {
      // The node container's own start script (password from the environment), with local ports and files.
      // prettier-ignore
      const args = [
        '--port', String(ports[i]), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-port', String(ports[n + i]),
        '--cluster-config-file', path.join(dir, `nodes-${i}.conf`), '--dir', dir, '--dbfilename', `dump-${i}.rdb`, '--save', '', '--appendonly', 'no',
      ];
      expect(node.command.slice(0, 2)).to.deep.equal(['sh', '-c']);
      const proc = spawn('sh', ['-c', redisStartScript(args, path.join(dir, `nodes-${i}.conf`)), 'redis-start'], {
        stdio: 'ignore',
        env: { PATH: process.env.PATH, REDISCLI_AUTH: PASSWORD },
      });
      proc.on('error', () => undefined);
      procs.push(proc);
    }
    await Promise.all(ports.slice(0, n).map((p) => waitForPort(p)));
  });
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('nodes refuse clients without the password, which is on no command line', async () => {
    const refused = await run('redis-cli', ['-p', String(ports[0]), 'ping']).then(
      (r) => r.stdout + r.stderr,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
    expect(refused).to.match(/NOAUTH/);
    expect(await cli(0, 'ping')).to.contain('PONG');
    expect(await cli(0, 'config', 'get', 'masterauth')).to.contain(PASSWORD);
    const cmdline = readFileSync(`/proc/${procs[0]!.pid}/cmdline`, 'utf8');
    expect(cmdline).to.contain('redis-server').and.not.contain(PASSWORD);
  });

  it('repairs a cluster a failed run left half formed (two nodes met, some slots assigned), then exits at once when formed', async () => {
    const local = localJobScript();
    // What a run killed midway leaves: slots on one node, two nodes met, no replicas.
    await cli(0, 'cluster', 'addslotsrange', '0', '100');
    await cli(0, 'cluster', 'meet', '127.0.0.1', String(ports[1]));
    const first = await run('sh', ['-c', local], { timeout: 60_000, env: auth });
    expect(first.stdout)
      .to.contain('half formed')
      .and.match(/All 16384 slots covered/);
    await expectWholeCluster();
    const again = await run('sh', ['-c', local], { timeout: 45_000, env: auth });
    expect(again.stdout).to.contain('cluster already formed');
  });

  it("the services' cache client authenticates with STRATA_REDIS_PASSWORD, and is refused without it", async () => {
    const nodes = ports
      .slice(0, 3)
      .map((p) => `127.0.0.1:${p}`)
      .join(',');
    const env = (extra: Record<string, string>) => z.object(productionEnvShape).parse({ STRATA_REDIS_NODES: nodes, STRATA_REDIS_TIMEOUT_MS: '2000', ...extra });
    const cache = createProductionCache(productionSettings(env({ STRATA_REDIS_PASSWORD: PASSWORD })))!;
    const anonymous = createProductionCache(productionSettings(env({})))!;
    try {
      await eventually(async () => {
        await cache.set('sealed', 'yes');
        expect(await cache.get('sealed')).to.equal('yes');
      }, 'authenticated cache');
      let refused: unknown;
      await anonymous.get('sealed').catch((err: unknown) => (refused = err));
      expect(refused, 'a client without the password is refused').to.be.instanceOf(Error);
    } finally {
      await cache.close();
      await anonymous.close();
    }
  });

  it('node start re-resolves the peers of nodes.conf by their stable names (new pod addresses after a drain)', async () => {
    const conf = path.join(dir, 'stale-nodes.conf');
    writeFileSync(
      conf,
      [
        'aaa 10.1.2.3:6379@16379,localhost master - 0 0 1 connected 0-5460',
        'bbb 10.9.9.9:6379@16379,strata-redis-1-0.strata-redis-1.ns.svc myself,master - 0 0 2 connected 5461-10922',
        'vars currentEpoch 6 lastVoteEpoch 0',
        '',
      ].join('\n'),
    );
    // Only the rewrite: redis-server is replaced by `true`.
    const script = redisStartScript([], conf).replace(/exec redis-server[^\n]*/, 'exec true');
    await run('sh', ['-c', script.replace(/<<EOF[\s\S]*EOF/, '')], { env: auth });
    const lines = readFileSync(conf, 'utf8').split('\n');
    expect(lines[0]).to.match(/^aaa (127\.0\.0\.1|::1):6379@16379,localhost master/);
    expect(lines[1]).to.equal('bbb 10.9.9.9:6379@16379,strata-redis-1-0.strata-redis-1.ns.svc myself,master - 0 0 2 connected 5461-10922');
    expect(lines[2]).to.equal('vars currentEpoch 6 lastVoteEpoch 0');
  });
});
