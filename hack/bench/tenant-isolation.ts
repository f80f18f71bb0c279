/**
 * Tenant-isolation benchmark (prints figures; not a test): tenant B's signed 4 KiB GET latency
 * (p50/p95/p99/max, errors) through the standalone gateway while tenant A misbehaves, one scenario
 * at a time:
 *
 *   baseline      nothing else happens
 *   bad-input     A loops over listings with prefix=%00, keys with invalid UTF-8 and malformed XML to ?delete
 *   trickle       A holds 600 PUTs open that sent 10 bytes of a declared 1 000, then nothing
 *   login-flood   wrong-password POST /login, half from rotating X-Forwarded-For addresses, half from one
 *   hung-backend  A GETs from its bucket whose S3-compatible backend accepts connections and never answers
 *
 *   npx tsx hack/bench/tenant-isolation.ts      (BENCH_SECONDS=10 per scenario, BENCH_CONNECTIONS=4 for B)
 *   BENCH_ONLY=trickle,login-flood               (some scenarios only; the baseline always runs first)
 *
 * Every attack loop stops at its time or its request cap, whichever comes first; every socket and the
 * child process are closed at the end. The load average is printed: on a shared machine the figures
 * are only comparable within one run.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { sendRaw, signRaw, UNSIGNED_PAYLOAD, type Credentials, type RawOutcome, type RawRequest } from '../../test/e2e/support/raw-http.js';
import { startS3rver } from '../../test/support/rgw.js';
import { startTcpProxy } from '../../test/support/tcp-proxy.js';
import { answersOk, ROOT, standaloneSettings } from './stacks.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const OBJECT_BYTES = 4096;
const OBJECTS = 16;
/** B's GETs that take longer are counted as errors (and bound the scenario's tail). */
const GET_DEADLINE_MS = 15_000;
const TRICKLED_BODIES = 600;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitHealthy(origin: string, exited: () => boolean): Promise<void> {
  const check = () => {
    if (exited()) throw new Error('the standalone process exited before it was healthy');
  };
  if (!(await answersOk(`${origin}/healthz`, 120_000, check))) throw new Error('the standalone process did not become healthy in 120 s');
}

async function loginToken(origin: string): Promise<string> {
  const r = await fetch(`${origin}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: ROOT.user, password: ROOT.password }),
  });
  if (!r.ok) throw new Error(`root login failed: ${r.status}`);
  return ((await r.json()) as { data: { token: string } }).data.token;
}

async function createTenant(origin: string, token: string, username: string): Promise<Credentials> {
  const res = await fetch(`${origin}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: `${username}-password-1` }),
  });
  if (res.status !== 201) throw new Error(`creating ${username} failed: ${res.status} ${await res.text()}`);
  const { accessKey, secretKey } = ((await res.json()) as { data: { accessKey: string; secretKey: string } }).data;
  return { accessKey, secret: secretKey };
}

const statusOf = (o: RawOutcome) => (o.kind === 'answered' ? String(o.status) : o.kind);

/** Counts of outcomes by status (or closed/hang), for the attack's side of a scenario. */
class Tally {
  readonly counts = new Map<string, number>();
  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  toString(): string {
    return (
      [...this.counts]
        .sort()
        .map(([k, n]) => `${k}×${n}`)
        .join(' ') || 'none'
    );
  }
}

/** `workers` loops calling `step` until `until` or `cap` calls in all. */
async function loop(workers: number, until: () => boolean, cap: number, step: (i: number) => Promise<void>): Promise<void> {
  let n = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!until() && n < cap) await step(n++);
    }),
  );
}

interface Latencies {
  ms: number[];
  errors: number;
  errorKinds: Tally;
}

/** B's signed GETs over keep-alive connections, `CONNECTIONS` at a time, for `SECONDS`. */
async function measureB(urls: string[], agent: http.Agent): Promise<Latencies> {
  const out: Latencies = { ms: [], errors: 0, errorKinds: new Tally() };
  const end = Date.now() + SECONDS * 1000;
  await loop(
    CONNECTIONS,
    () => Date.now() >= end,
    1_000_000,
    async (i) => {
      const t0 = performance.now();
      const status = await new Promise<string>((resolve) => {
        const req = http.get(urls[i % urls.length]!, { agent }, (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => (bytes += c.length));
          res.on('end', () => resolve(res.statusCode === 200 && bytes === OBJECT_BYTES ? 'ok' : String(res.statusCode)));
          res.on('error', () => resolve('reset'));
        });
        req.setTimeout(GET_DEADLINE_MS, () => req.destroy(new Error('deadline')));
        req.on('error', (err) => resolve(err.message === 'deadline' ? 'deadline' : 'error'));
      });
      out.ms.push(performance.now() - t0);
      if (status !== 'ok') {
        out.errors++;
        out.errorKinds.add(status);
      }
    },
  );
  return out;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-isolation-bench-'));
  const cleanups: Array<() => Promise<unknown>> = [() => rm(work, { recursive: true, force: true })];
  const loadBefore = os.loadavg();
  try {
    // The S3-compatible backend of A's second bucket: a real s3rver behind a proxy that can go silent.
    const s3server = await startS3rver();
    cleanups.push(() => s3server.stop());
    const proxy = await startTcpProxy({ port: Number(new URL(s3server.endpoint).port) });
    cleanups.push(() => proxy.close());

    const standalone = await standaloneSettings(path.join(work, 'data'));
    const gwPort = standalone.gatewayPort;
    const origin = `http://127.0.0.1:${gwPort}`;
    const host = `127.0.0.1:${gwPort}`;
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'images/standalone/src/main.ts')], {
      cwd: repo,
      env: {
        ...process.env,
        ...standalone.env,
        STRATA_BACKEND_MINIO_ENDPOINT: `http://127.0.0.1:${proxy.port}`,
        STRATA_BACKEND_MINIO_ACCESS_KEY: s3server.accessKey,
        STRATA_BACKEND_MINIO_SECRET_KEY: s3server.secretKey,
        STRATA_BACKEND_MINIO_BUCKET: `blobs-${randomBytes(4).toString('hex')}`,
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'error',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // Its log (warnings, the startup banner) is shown only when it exits on its own.
    let logTail = '';
    child.stderr!.on('data', (c: Buffer) => (logTail = (logTail + c.toString()).slice(-8000)));
    let killing = false;
    cleanups.push(async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killing = true;
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    });
    let exited = false;
    child.once('exit', (code, signal) => {
      exited = true;
      if (!killing) console.log(`!! the standalone process exited (${code ?? signal}); its log's end:\n${logTail}`);
    });
    await waitHealthy(origin, () => exited);

    const token = await loginToken(origin);
    const a = await createTenant(origin, token, 'tenant-a');
    const b = await createTenant(origin, token, 'tenant-b');
    const signed = (creds: Credentials, req: RawRequest, opts?: Parameters<typeof signRaw>[3]) => signRaw(req, host, creds, opts);
    const send = (req: RawRequest, deadlineMs = 30_000) => sendRaw(gwPort, req, deadlineMs);
    const mustOk = async (what: string, o: Promise<RawOutcome>) => {
      const r = await o;
      if (r.kind !== 'answered' || r.status !== 200) throw new Error(`${what}: ${statusOf(r)} ${r.kind === 'answered' ? r.body.toString() : ''}`);
    };
    await mustOk('A creates its bucket', send(signed(a, { method: 'PUT', target: '/tenant-a-fs', headers: [] })));
    await mustOk('A creates its backend bucket', send(signed(a, { method: 'PUT', target: '/tenant-a-remote', headers: [['x-strata-backend', 'minio']] })));
    const small = Buffer.from('on the backend');
    await mustOk(
      'A writes to its backend bucket',
      send(signed(a, { method: 'PUT', target: '/tenant-a-remote/o.txt', headers: [['content-length', String(small.length)]], body: small })),
    );
    await mustOk('B creates its bucket', send(signed(b, { method: 'PUT', target: '/tenant-b', headers: [] })));
    const urls: string[] = [];
    for (let i = 0; i < OBJECTS; i++) {
      const body = randomBytes(OBJECT_BYTES);
      const key = `object-${i}.bin`;
      await mustOk(`B writes ${key}`, send(signed(b, { method: 'PUT', target: `/tenant-b/${key}`, headers: [['content-length', String(body.length)]], body })));
      urls.push(
        presignUrl({ method: 'GET', origin, path: `/tenant-b/${key}`, accessKey: b.accessKey, secret: b.secret, region: 'us-east-1', expiresSeconds: 3600 }),
      );
    }
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    cleanups.push(async () => agent.destroy());

    interface Scenario {
      name: string;
      /** Starts the attack; the returned function stops it and returns a summary of what A saw. */
      start(): Promise<() => Promise<string>>;
    }
    const timed = (run: (stopped: () => boolean) => Promise<string>) => async () => {
      let stop = false;
      const done = run(() => stop || exited);
      return async () => {
        stop = true;
        return done;
      };
    };
    const scenarios: Scenario[] = [
      { name: 'baseline', start: timed(async () => 'no attack') },
      {
        name: 'bad-input',
        start: timed(async (stopped) => {
          const tally = new Tally();
          const malformed = Buffer.from('<Delete><Object><Key>k</Key></Object');
          const md5 = createHash('md5').update(malformed).digest('base64');
          const requests = [
            () => signed(a, { method: 'GET', target: '/tenant-a-fs?list-type=2&prefix=%00', headers: [] }),
            () => signed(a, { method: 'GET', target: '/tenant-a-fs?list-type=2&start-after=%00', headers: [] }),
            () => signed(a, { method: 'PUT', target: '/tenant-a-fs/bad-%FF%FE-key', headers: [['content-length', '3']], body: Buffer.from('abc') }),
            () => signed(a, { method: 'GET', target: '/tenant-a-fs/%C0%AF', headers: [] }),
            () =>
              signed(a, {
                method: 'POST',
                target: '/tenant-a-fs?delete',
                headers: [
                  ['content-length', String(malformed.length)],
                  ['content-md5', md5],
                ],
                body: malformed,
              }),
          ];
          await loop(4, stopped, 200_000, async (i) => tally.add(statusOf(await send(requests[i % requests.length]!(), 10_000))));
          return `A's bad requests: ${tally}`;
        }),
      },
      {
        name: 'trickle',
        start: async () => {
          const sockets: net.Socket[] = [];
          const answers = new Tally();
          const head = signed(a, { method: 'PUT', target: '/tenant-a-fs/trickled', headers: [['content-length', '1000']] }, { payloadHash: UNSIGNED_PAYLOAD });
          for (let i = 0; i < TRICKLED_BODIES; i++) {
            const s = net.connect({ host: '127.0.0.1', port: gwPort });
            s.on('error', () => undefined);
            let answered = false;
            s.on('data', (c: Buffer) => {
              if (!answered) answers.add(/^HTTP\/1\.[01] (\d{3})/.exec(c.toString('latin1'))?.[1] ?? 'data');
              answered = true;
            });
            s.on('close', () => {
              if (!answered) answers.add('closed');
            });
            s.on('connect', () => {
              const lines = [...head.headers.map(([k, v]) => `${k}: ${v}`), 'connection: close'].join('\r\n');
              s.write(Buffer.from(`PUT ${head.target} HTTP/1.1\r\n${lines}\r\n\r\n`, 'latin1'));
              s.write(Buffer.alloc(10, 0x61));
            });
            sockets.push(s);
          }
          await sleep(500);
          return async () => {
            const open = sockets.filter((s) => !s.destroyed).length;
            for (const s of sockets) s.destroy();
            return `${TRICKLED_BODIES} trickled PUTs: ${open} still open at the end; answers before that: ${answers}`;
          };
        },
      },
      {
        name: 'login-flood',
        start: timed(async (stopped) => {
          const tally = new Tally();
          const body = JSON.stringify({ username: 'tenant-a', password: 'wrong-password' });
          await loop(16, stopped, 100_000, async (i) => {
            // Even attempts come from one address, odd ones each from a new one.
            const xff = i % 2 === 0 ? '203.0.113.7' : `198.51.${(i >> 8) & 255}.${i & 255}`;
            const o = await send(
              {
                method: 'POST',
                target: '/login',
                headers: [
                  ['host', host],
                  ['content-type', 'application/json'],
                  ['x-forwarded-for', xff],
                  ['content-length', String(body.length)],
                ],
                body: Buffer.from(body),
              },
              10_000,
            );
            tally.add(statusOf(o));
          });
          return `/login attempts: ${tally}`;
        }),
      },
      {
        name: 'hung-backend',
        start: async () => {
          proxy.stall();
          const run = timed(async (stopped) => {
            const tally = new Tally();
            await loop(24, stopped, 10_000, async () =>
              tally.add(statusOf(await send(signed(a, { method: 'GET', target: '/tenant-a-remote/o.txt', headers: [] }), 30_000))),
            );
            return `A's GETs of the hung-backend bucket: ${tally}`;
          });
          const stop = await run();
          return async () => {
            const summary = await stop();
            proxy.restore();
            return summary;
          };
        },
      },
    ];

    console.log(`tenant isolation: B's signed 4 KiB GETs, ${CONNECTIONS} keep-alive connections, ${SECONDS} s per scenario`);
    console.log(`load average before: ${loadBefore.map((l) => l.toFixed(2)).join(' ')} (${os.cpus().length} cores)`);
    const rows: string[] = [];
    for (const scenario of scenarios) {
      if (ONLY && scenario.name !== 'baseline' && !ONLY.includes(scenario.name)) continue;
      if (exited) break;
      const stop = await scenario.start();
      const lat = await measureB(urls, agent);
      const attack = await stop();
      const sorted = [...lat.ms].sort((x, y) => x - y);
      const f = (n: number) => n.toFixed(1).padStart(8);
      const row =
        `${scenario.name.padEnd(13)} ${String(sorted.length).padStart(7)} ${f(percentile(sorted, 50))} ${f(percentile(sorted, 95))} ` +
        `${f(percentile(sorted, 99))} ${f(sorted[sorted.length - 1] ?? NaN)} ${String(lat.errors).padStart(6)}`;
      rows.push(row);
      console.log(`${row}${lat.errors ? `  (${lat.errorKinds})` : ''}\n    ${attack}; load ${os.loadavg()[0]!.toFixed(2)}`);
      // Let the process settle (closed sockets, breakers) before the next scenario.
      await sleep(2000);
    }
    console.log('\nscenario         GETs    p50 ms   p95 ms   p99 ms   max ms errors');
    for (const row of rows) console.log(row);
    console.log(
      `load average after: ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; the standalone process ${exited ? 'EXITED' : 'stayed up'}`,
    );
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
