import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { md5Hex } from './support/s3.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * What `npm start` runs (`tsx images/standalone/src/main.ts`) as a real child process: the banner
 * names the endpoint and the root credentials, and SIGTERM lets an upload in flight finish before
 * the process exits 0.
 */
describe('e2e: npm start (the standalone process): banner and graceful SIGTERM', function () {
  this.timeout(120_000);
  let child: ChildProcess | undefined;
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-npm-start-'));
  });
  after(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child!.once('exit', r));
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('prints the S3 endpoint and root credentials, serves, and drains an in-flight upload on SIGTERM', async () => {
    const gatewayPort = await freePort();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      STRATA_DATA_DIR: dataDir,
      STRATA_HOST: '127.0.0.1',
      STRATA_GATEWAY_PORT: String(gatewayPort),
      STRATA_DATA_PLANE_PORT: String(await freePort()),
      STRATA_CONTROL_PLANE_PORT: String(await freePort()),
      // The AI services are not what this test is about: off where the platform allows it, else on free ports.
      STRATA_DISABLED_SERVICES: 'model-server,poem-app,image-search',
      STRATA_MODEL_SERVER_PORT: String(await freePort()),
      STRATA_POEM_APP_PORT: String(await freePort()),
      STRATA_IMAGE_SEARCH_PORT: String(await freePort()),
      STRATA_PURGE_SCHEDULE: 'off',
      LOG_LEVEL: 'warn',
      OMP_WAIT_POLICY: 'PASSIVE',
    };
    const proc = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'images/standalone/src/main.ts')], { cwd: repo, env, stdio: ['ignore', 'ignore', 'pipe'] });
    child = proc;
    let banner = '';
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      proc.stderr!.on('data', (c: Buffer) => {
        banner += c.toString();
        if (/aws --endpoint-url/.test(banner)) resolve();
      });
      void exited.then((code) => reject(new Error(`npm start exited (${code}) before its banner:\n${banner}`)));
    });
    const endpoint = `http://127.0.0.1:${gatewayPort}`;
    expect(banner).to.contain(`S3 endpoint   ${endpoint}`);
    expect(banner).to.match(/root user\s+strata\b/);
    // No STRATA_ROOT_PASSWORD: the development default is printed, and it is the root's SigV4 secret.
    const password = /root password\s+(\S+)/.exec(banner)?.[1] ?? '';
    expect(password).to.have.length.greaterThan(7);
    const sign = (method: string, p: string) => presignUrl({ method, origin: endpoint, path: p, accessKey: 'strata', secret: password, region: 'us-east-1', expiresSeconds: 300 });
    expect((await fetch(sign('PUT', '/started'), { method: 'PUT' })).status).to.equal(200);

    // An upload is half sent when SIGTERM arrives: it still completes, then the process exits 0.
    const body = randomBytes(2 * 1024 * 1024);
    const url = new URL(sign('PUT', '/started/in-flight.bin'));
    const answer = new Promise<{ status: number; etag: string }>((resolve, reject) => {
      // 100-continue: the server has parsed the request (it is in flight, not an idle connection) before SIGTERM.
      const headers = { 'content-length': body.length, expect: '100-continue' };
      const req = http.request({ host: url.hostname, port: url.port, method: 'PUT', path: url.pathname + url.search, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, etag: String(res.headers.etag) }));
      });
      req.on('error', reject);
      req.once('continue', () => {
        req.write(body.subarray(0, body.length / 2), () => {
          proc.kill('SIGTERM');
          setTimeout(() => req.end(body.subarray(body.length / 2)), 300);
        });
      });
      req.flushHeaders();
    });
    expect(await answer).to.deep.equal({ status: 200, etag: `"${md5Hex(body)}"` });
    expect(await exited).to.equal(0);
    // Gone: nothing listens any more.
    const refused = await fetch(`${endpoint}/healthz`).then(
      () => false,
      () => true,
    );
    expect(refused).to.equal(true);
  });
});
