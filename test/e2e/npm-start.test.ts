import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify, stripVTControlCharacters } from 'node:util';
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
    const proc = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'images/standalone/src/main.ts')], {
      cwd: repo,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
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
    const sign = (method: string, p: string) =>
      presignUrl({ method, origin: endpoint, path: p, accessKey: 'strata', secret: password, region: 'us-east-1', expiresSeconds: 300 });
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

/**
 * A root for the compiler (`--sysroot`) that is this machine's minus FAISS's headers: building the
 * FAISS binding against it fails as it does on a machine without libfaiss-dev.
 */
async function sysrootWithoutFaiss(dir: string): Promise<string> {
  await mkdir(path.join(dir, 'usr', 'include'), { recursive: true });
  for (const entry of readdirSync('/usr/include')) {
    if (entry !== 'faiss') await symlink(path.join('/usr/include', entry), path.join(dir, 'usr', 'include', entry));
  }
  for (const lib of ['usr/lib', 'usr/lib64', 'lib', 'lib64']) {
    if (existsSync(`/${lib}`)) await symlink(`/${lib}`, path.join(dir, lib));
  }
  return dir;
}

/** The banner's value after `label` (e.g. "poem app" → its URL). */
function bannerValue(banner: string, label: string): string {
  const value = new RegExp(`^  ${label}\\s+(\\S+)`, 'm').exec(banner)?.[1];
  if (!value) throw new Error(`no "${label}" in the banner:\n${banner}`);
  return value;
}

/**
 * `npm start` as a new user runs it, on a machine whose compiler cannot see FAISS: the binding's build
 * fails quietly with what to install, every service starts, image search answers from its exact
 * in-process index with the demo test encoder and demo images, and the banner's commands work.
 */
describe('e2e: npm start on a machine without FAISS (first run)', function () {
  this.timeout(600_000);
  let child: ChildProcess | undefined;
  let dir: string;
  const run = promisify(execFile);

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-first-run-'));
  });
  after(async () => {
    // npm, its shell, tsx and the platform: the whole process group.
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      const exit = new Promise((r) => child!.once('exit', r));
      process.kill(-child.pid, 'SIGKILL');
      await exit;
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('starts every service, searches on the exact index and prints commands that work', async () => {
    // A fresh copy of the binding's sources: its build directory starts empty, as after `npm ci`.
    const native = path.join(dir, 'native');
    await mkdir(native);
    const sources = (await readdir(path.join(repo, 'images/image-search/native'))).filter((f) => /\.(cc|h|gyp)$/.test(f));
    for (const f of sources) await copyFile(path.join(repo, 'images/image-search/native', f), path.join(native, f));
    const sysroot = await sysrootWithoutFaiss(path.join(dir, 'sysroot'));
    const ports = {
      STRATA_GATEWAY_PORT: await freePort(),
      STRATA_DATA_PLANE_PORT: await freePort(),
      STRATA_CONTROL_PLANE_PORT: await freePort(),
      STRATA_MODEL_SERVER_PORT: await freePort(),
      STRATA_POEM_APP_PORT: await freePort(),
      STRATA_IMAGE_SEARCH_PORT: await freePort(),
    };
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      STRATA_DATA_DIR: path.join(dir, 'data'),
      STRATA_FAISS_BINDING_DIR: native,
      CXXFLAGS: `--sysroot=${sysroot}`,
      // The copy lives outside the repository: binding.gyp finds node-addon-api through NODE_PATH.
      NODE_PATH: path.join(repo, 'node_modules'),
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      OMP_WAIT_POLICY: 'PASSIVE',
    };
    // A process group of its own, as a terminal gives it: Ctrl+C (here SIGTERM) reaches every process in it.
    const proc = spawn('npm', ['start'], { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child = proc;
    let stdout = '';
    let stderr = '';
    proc.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      proc.stderr!.on('data', (c: Buffer) => {
        stderr += c.toString();
        if (/Stop with Ctrl\+C/.test(stderr)) resolve();
      });
      void exited.then((code) => reject(new Error(`npm start exited (${code}) before its banner:\n${stdout}\n${stderr}`)));
    });

    // The failed build: a few lines saying why and what to install, no node-gyp chatter, no npm warnings.
    expect(stdout).to.contain('FAISS binding not built');
    expect(stdout).to.match(/faiss\/\w+\.h: No such file or directory/);
    expect(stdout).to.contain('apt-get install g++ make python3 libfaiss-dev libopenblas-dev');
    expect(stdout).to.not.match(/gyp info|gyp verb/);
    expect(stderr).to.not.match(/npm warn/i);
    expect(existsSync(path.join(native, 'build/Release/strata_faiss.node'))).to.equal(false);
    // Not a terminal: the log lines are JSON.
    const logLines = stdout.split('\n').filter((l) => l.startsWith('{'));
    expect(logLines.length).to.be.greaterThan(0);
    logLines.forEach((l) => JSON.parse(l));

    // Every service answers its health endpoint.
    for (const port of Object.values(ports)) expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
    const imageSearch = bannerValue(stderr, 'image search');
    expect(stderr).to.match(/image search\s+\S+\s+demo test encoder/);
    expect(stderr).to.contain('exact in-process index (for FAISS: apt-get install libfaiss-dev libopenblas-dev');
    const status = (await (await fetch(`${imageSearch}/api/status`)).json()) as {
      ready: boolean;
      index: { totalVectors: number; engine: { kind: string; note: string } };
    };
    expect(status.ready).to.equal(true);
    expect(status.index.engine.kind).to.equal('exact');
    expect(status.index.engine.note).to.contain('apt-get install libfaiss-dev libopenblas-dev');
    expect(status.index.totalVectors).to.equal(8);

    // The banner's commands, run as printed: the aws CLI upload and listing, then the search.
    const commands = stderr
      .slice(stderr.indexOf('Try:'))
      .split('\n')
      .slice(1)
      .filter((l) => l.startsWith('  '))
      .map((l) => l.trim());
    const shell = commands.filter((c) => !c.startsWith('open ') && !c.startsWith('curl '));
    expect(shell[0]).to.match(/^export AWS_ACCESS_KEY_ID=strata /);
    const aws = await run('bash', ['-c', shell.join('\n')], { cwd: repo, env: { PATH: process.env.PATH, HOME: dir } });
    expect(aws.stdout).to.match(/\d+ README\.md/);
    const search = commands.find((c) => c.startsWith('curl '))!;
    const answer = JSON.parse((await run('bash', ['-c', search], { cwd: repo })).stdout) as { results: Array<{ path: string }> };
    expect(answer.results[0].path).to.equal('red-apple.png');
    // The poem page opens.
    const poemUrl = /^open (\S+) in a browser/.exec(commands.find((c) => c.startsWith('open '))!)![1];
    const page = await fetch(poemUrl);
    expect(page.status).to.equal(200);
    expect(await page.text()).to.match(/poem/i);

    // npm exits at once; the platform drains and closes every port.
    process.kill(-proc.pid!, 'SIGTERM');
    await exited;
    const answering = async () =>
      (
        await Promise.all(
          Object.values(ports).map((port) =>
            fetch(`http://127.0.0.1:${port}/healthz`).then(
              () => port,
              () => 0,
            ),
          ),
        )
      ).filter(Boolean);
    const deadline = Date.now() + 60_000;
    while ((await answering()).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await answering()).to.deep.equal([]);
  });
});

/**
 * `npm start` in a terminal (a pseudo-terminal from `script`), as a new user on a machine without FAISS
 * runs it the first time: what comes before the banner (npm's script lines, the binding's failed
 * build, the platform's start) fits in a dozen lines, so the banner is on the first screen.
 */
describe('e2e: npm start in a terminal (first screen)', function () {
  this.timeout(600_000);
  let child: ChildProcess | undefined;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'strata-first-screen-'));
  });
  after(async () => {
    // script, and with its terminal gone, npm and the platform behind it (SIGHUP).
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      const exit = new Promise((r) => child!.once('exit', r));
      process.kill(-child.pid, 'SIGKILL');
      await exit;
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('prints at most 12 lines before the banner, and stops on Ctrl+C', async () => {
    const native = path.join(dir, 'native');
    await mkdir(native);
    const sources = (await readdir(path.join(repo, 'images/image-search/native'))).filter((f) => /\.(cc|h|gyp)$/.test(f));
    for (const f of sources) await copyFile(path.join(repo, 'images/image-search/native', f), path.join(native, f));
    const sysroot = await sysrootWithoutFaiss(path.join(dir, 'sysroot'));
    const gatewayPort = await freePort();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TERM: 'xterm',
      STRATA_DATA_DIR: path.join(dir, 'data'),
      STRATA_FAISS_BINDING_DIR: native,
      CXXFLAGS: `--sysroot=${sysroot}`,
      NODE_PATH: path.join(repo, 'node_modules'),
      STRATA_GATEWAY_PORT: String(gatewayPort),
      STRATA_DATA_PLANE_PORT: String(await freePort()),
      STRATA_CONTROL_PLANE_PORT: String(await freePort()),
      STRATA_MODEL_SERVER_PORT: String(await freePort()),
      STRATA_POEM_APP_PORT: String(await freePort()),
      STRATA_IMAGE_SEARCH_PORT: String(await freePort()),
      OMP_WAIT_POLICY: 'PASSIVE',
    };
    // util-linux script: `npm start` on a pseudo-terminal, everything it shows copied to our stdout.
    const proc = spawn('script', ['-qfec', 'npm start', '/dev/null'], { cwd: repo, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    child = proc;
    let screen = '';
    proc.stdout!.on('data', (c: Buffer) => (screen += c.toString()));
    proc.stderr!.on('data', (c: Buffer) => (screen += c.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setInterval(() => {
        if (/Stop with Ctrl\+C/.test(screen)) {
          clearInterval(timer);
          resolve();
        }
      }, 100);
      void exited.then((code) => {
        clearInterval(timer);
        reject(new Error(`npm start exited (${code}) before its banner:\n${screen}`));
      });
    });

    // The lines as the terminal shows them: colours, npm's spinner and line erasures removed.
    const lines = stripVTControlCharacters(screen).replace(/\r/g, '').split('\n');
    const banner = lines.findIndex((l) => l.startsWith('Strata is running'));
    expect(banner, screen).to.be.greaterThan(0);
    const before = lines.slice(0, banner);
    expect(before.length, `before the banner:\n${before.join('\n')}`).to.be.at.most(12);
    // What it says there: the failed build in two lines with what to install, and no log lines.
    expect(before.join('\n')).to.match(/FAISS binding not built: .*faiss\/\w+\.h: No such file or directory\n {2}Image search runs on an exact/);
    expect(
      before.filter((l) => /\b(INFO|WARN|ERROR)\b/.test(l)),
      before.join('\n'),
    ).to.deep.equal([]);

    // Ctrl+C on the terminal stops npm and the platform: the gateway's port closes.
    proc.stdin!.write('\x03');
    await exited;
    const answers = () =>
      fetch(`http://127.0.0.1:${gatewayPort}/healthz`).then(
        () => true,
        () => false,
      );
    const deadline = Date.now() + 60_000;
    while ((await answers()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await answers()).to.equal(false);
  });
});
