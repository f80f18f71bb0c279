import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { eventually, harnessHooks } from '../controllers/support/harness.js';
import { freshDirPerTest } from '../support/temp-dir.js';

const root = path.resolve(import.meta.dirname, '../..');

describe('operator entrypoint (operator/main.ts as a process)', function () {
  this.timeout(60_000);
  const h = harnessHooks('each');
  const dir = freshDirPerTest('strata-operator-main-');

  it('loads KUBECONFIG, serves /healthz and exits cleanly on SIGTERM', async () => {
    const kubeconfig = path.join(dir.path, 'kubeconfig');
    writeFileSync(kubeconfig, h.fake.kubeConfig().exportConfig());
    // Port 0 is not observable from outside: pick a free one through a throwaway server.
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const child = spawn(process.execPath, ['--import', 'tsx', 'operator/main.ts'], {
      cwd: root,
      env: {
        ...process.env,
        KUBECONFIG: kubeconfig,
        KUBERNETES_SERVICE_HOST: '',
        PORT: String(port),
        LOG_LEVEL: 'silent',
        LEADER_ELECTION_NAMESPACE: 'strata-system',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await eventually(async () => expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200), `operator up (${output})`, 30_000);
      await eventually(
        async () => expect((await (await fetch(`http://127.0.0.1:${port}/leader`)).json()) as object).to.deep.equal({ leader: true }),
        'leading',
        10_000,
      );
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, output).to.equal(0);
  });
});
