import childProcess, { execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { expect } from 'chai';
import { childPrototype, refuseServers } from './server-guard.js';

// The check behind `npm run test:unit`: a listed file that reaches for a server fails, naming what it tried.
describe('test:unit server guard', () => {
  let refused: string[];
  let restore: () => void;
  beforeEach(() => {
    refused = [];
    restore = refuseServers((why) => refused.push(why));
  });
  afterEach(() => restore());

  it('refuses connections to PostgreSQL, Redis and RabbitMQ in each form net takes, as a refused connection', async () => {
    for (const connect of [
      () => net.connect(5432, '127.0.0.1'),
      () => net.createConnection({ port: 6379, host: '127.0.0.1' }),
      () => new net.Socket().connect({ port: 5672, host: 'localhost' }),
    ]) {
      const [err] = (await once(connect(), 'error')) as [NodeJS.ErrnoException];
      expect(err.code).to.equal('ECONNREFUSED');
    }
    expect(refused).to.have.length(3);
    expect(refused[0]).to.match(/PostgreSQL \(port 5432\)/);
    expect(refused[1]).to.match(/Redis \(port 6379\)/);
    expect(refused[2]).to.match(/RabbitMQ \(port 5672\)/);
  });

  it('lets in-process servers on other ports answer', async () => {
    const server = net.createServer((s) => s.end('hi'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      const [data] = (await once(socket, 'data')) as [Buffer];
      expect(data.toString()).to.equal('hi');
    } finally {
      server.close();
    }
    expect(refused).to.deep.equal([]);
  });

  it('refuses server binaries started any way, and runs other commands', async () => {
    expect(() => spawn('redis-server', ['--port', '0'])).to.throw(/starts redis-server/);
    expect(() => execFile('/usr/lib/postgresql/15/bin/postgres', [])).to.throw(/starts postgres/);
    expect(() => execFileSync('chromium', ['--version'])).to.throw(/starts chromium/);
    expect(refused).to.have.length(3);
    expect(execFileSync(process.execPath, ['-e', 'process.stdout.write("ok")']).toString()).to.equal('ok');
  });

  it('puts back what it replaced once restored', () => {
    restore();
    restore = () => undefined;
    const patched = { connect: net.Socket.prototype.connect, spawn: childPrototype().spawn, spawnSync: childProcess.spawnSync };
    refuseServers(() => undefined)();
    expect({ connect: net.Socket.prototype.connect, spawn: childPrototype().spawn, spawnSync: childProcess.spawnSync }).to.deep.equal(patched);
  });
});
