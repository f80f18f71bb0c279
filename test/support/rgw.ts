import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3';
import { freePorts } from './ports.js';
import { cleanUpAtExit, sharedPerRun } from './throwaway.js';

const run = promisify(execFile);

/** The single-node Ceph + radosgw script (see its header). */
export const RGW_SCRIPT = process.env.STRATA_RGW_SCRIPT ?? fileURLToPath(new URL('../../hack/rgw-standalone.sh', import.meta.url));
const CEPH_BINARIES = ['ceph-mon', 'ceph-osd', 'radosgw', 'radosgw-admin', 'ceph', 'ceph-authtool', 'monmaptool'];

export interface S3ServerHarness {
  /** http://127.0.0.1:<port>; use path-style addressing (forcePathStyle) and region us-east-1. */
  endpoint: string;
  accessKey: string;
  secretKey: string;
  /** Which server answers: a real radosgw, or s3rver when Ceph cannot run here. */
  kind: 'radosgw' | 's3rver';
  /** Why radosgw was not used (kind s3rver only). */
  fallbackReason?: string;
  /** Stop the server(s) and remove their files. Safe to call twice. */
  stop(): Promise<void>;
}

function killNow(entry: { dir: string; pidDir?: string }): void {
  if (entry.pidDir && existsSync(entry.pidDir)) {
    for (const f of readdirSync(entry.pidDir).filter((n) => n.endsWith('.pid'))) {
      const pid = Number(readFileSync(path.join(entry.pidDir, f), 'utf8').trim());
      try {
        if (pid > 0) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  rmSync(entry.dir, { recursive: true, force: true });
}

/** Why this machine cannot run the radosgw script, or undefined when it can. */
export async function cephUnavailableReason(): Promise<string | undefined> {
  if (!existsSync(RGW_SCRIPT)) return `${RGW_SCRIPT} not found`;
  const missing: string[] = [];
  for (const bin of CEPH_BINARIES) {
    try {
      await run('sh', ['-c', `command -v ${bin}`]);
    } catch {
      missing.push(bin);
    }
  }
  if (missing.length) return `missing ${missing.join(', ')} (apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common)`;
  return undefined;
}

const s3ClientFor = (h: Pick<S3ServerHarness, 'endpoint' | 'accessKey' | 'secretKey'>) =>
  new S3Client({
    endpoint: h.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: h.accessKey, secretAccessKey: h.secretKey },
  });

async function waitUntilS3Answers(h: Pick<S3ServerHarness, 'endpoint' | 'accessKey' | 'secretKey'>, timeoutMs: number): Promise<void> {
  const client = s3ClientFor(h);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await client.send(new ListBucketsCommand({}));
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`S3 server at ${h.endpoint} does not answer: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    client.destroy();
  }
}

async function startRadosgw(): Promise<S3ServerHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-rgw-'));
  const cephDir = path.join(dir, 'ceph');
  const entry = { dir, pidDir: path.join(cephDir, 'run') };
  const kill = cleanUpAtExit(() => killNow(entry));
  try {
    const [rgwPort, monV2, monV1] = (await freePorts(3)) as [number, number, number];
    // The script pins the monitor to 3300/6789; a copy on free ports lets several test runs (and
    // a developer's own cluster) coexist.
    const original = readFileSync(RGW_SCRIPT, 'utf8');
    const patched = original.replaceAll('127.0.0.1:3300', `127.0.0.1:${monV2}`).replaceAll('127.0.0.1:6789', `127.0.0.1:${monV1}`);
    if (!patched.includes(`:${monV2}`) || !patched.includes(`:${monV1}`)) {
      throw new Error(`${RGW_SCRIPT} no longer names the monitor as 127.0.0.1:3300/6789; update the harness`);
    }
    const script = path.join(dir, 'rgw-standalone.sh');
    writeFileSync(script, patched, { mode: 0o755 });
    const env = { ...process.env, DIR: cephDir, RGW_PORT: String(rgwPort) };
    const { stdout } = await run('bash', [script, 'start'], { env, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 });
    if (!/-> 2\d\d/.test(stdout)) throw new Error(`radosgw did not come up:\n${stdout.slice(-2000)}`);

    const accessKey = `STRATA${randomBytes(7).toString('hex').toUpperCase()}`;
    const secretKey = randomBytes(30).toString('base64url');
    let lastError: unknown;
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        await run('bash', [script, 'users', accessKey, secretKey, `strata-test-${attempt}`], { env, timeout: 60_000 });
        lastError = undefined;
        break;
      } catch (err) {
        lastError = err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    if (lastError) throw lastError;
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await waitUntilS3Answers({ endpoint, accessKey, secretKey }, 60_000);

    let stopping: Promise<void> | undefined;
    return {
      endpoint,
      accessKey,
      secretKey,
      kind: 'radosgw',
      stop: () => {
        stopping ??= (async () => {
          await run('bash', [script, 'stop'], { env, timeout: 60_000 }).catch(() => undefined);
          kill();
        })();
        return stopping;
      },
    };
  } catch (err) {
    kill();
    throw err;
  }
}

interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverConstructor = new (opts: { address: string; port: number; directory: string; silent: boolean }) => S3rverInstance;

/** The same interface over s3rver (a small S3 emulator in Node), for machines without Ceph. */
export async function startS3rver(fallbackReason?: string): Promise<S3ServerHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-s3rver-'));
  const entry = { dir };
  const kill = cleanUpAtExit(() => killNow(entry));
  // s3rver is CommonJS without type declarations.
  const S3rver = createRequire(import.meta.url)('s3rver') as S3rverConstructor;
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true });
  const { port } = await server.run();
  let stopping: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    // s3rver's one built-in account.
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    kind: 's3rver',
    fallbackReason,
    stop: () => {
      stopping ??= (async () => {
        await server.close().catch(() => undefined);
        kill();
      })();
      return stopping;
    },
  };
}

/**
 * A real radosgw (single-node Ceph on memstore, via the shared script, on free ports) with one S3
 * user whose keys are returned. Where Ceph is not installed, or `STRATA_TEST_S3=s3rver`, the same
 * interface over s3rver; `kind` and `fallbackReason` say which one answered and why.
 */
export async function startRgw(): Promise<S3ServerHarness> {
  const reason = process.env.STRATA_TEST_S3 === 's3rver' ? 'STRATA_TEST_S3=s3rver' : await cephUnavailableReason();
  if (reason) return startS3rver(reason);
  return startRadosgw();
}

/**
 * The radosgw shared by every test file of this mocha run, started on first use (about 20 s) and
 * stopped when the process exits. Tests should use unique bucket names.
 */
export const sharedRgw = sharedPerRun(startRgw);

export { s3ClientFor };
