import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { sharedRedisCluster, startRedisCluster } from '../support/redis-cluster.js';

const run = promisify(execFile);
const cli = async (port: number, ...args: string[]) => (await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])).stdout;

describe('test harness: Redis Cluster', function () {
  this.timeout(120_000);

  it('shares one healthy cluster across callers: 3 masters, each with a replica, AOF on', async () => {
    const a = await sharedRedisCluster();
    const b = await sharedRedisCluster();
    expect(a).to.equal(b);
    expect(a.nodes).to.have.length(3);
    expect(a.replicas).to.have.length(3);
    for (const node of [...a.nodes, ...a.replicas]) expect(await cli(node.port, 'config', 'get', 'appendonly')).to.match(/appendonly\s+yes/);
    for (const replica of a.replicas) expect(await cli(replica.port, 'info', 'replication')).to.match(/role:slave[\s\S]*master_link_status:up/);
    for (const node of a.nodes) {
      const info = await cli(node.port, 'cluster', 'info');
      expect(info).to.match(/cluster_state:ok/);
      expect(info).to.match(/cluster_size:3/);
      expect(info).to.match(/cluster_slots_assigned:16384/);
    }
  });

  it('a private cluster stops completely: no server answers and its directory is gone', async () => {
    const cluster = await startRedisCluster();
    const port = cluster.nodes[0]!.port;
    const dir = (await cli(port, 'config', 'get', 'dir')).split('\n')[1]!.trim();
    expect(existsSync(dir)).to.equal(true);
    await cluster.stop();
    await cluster.stop();
    expect(existsSync(dir)).to.equal(false);
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    expect(refused).to.equal(true);
  });
});
