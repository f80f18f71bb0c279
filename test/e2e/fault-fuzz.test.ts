import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { CONTROL_PLANE_QUEUE } from '../../images/control-plane/src/events/consumer.js';
import { RabbitNames } from '../events/rabbitmq-fixture.js';
import { sharedPgReplica } from '../support/pg-replica.js';
import { sharedRedisCluster } from '../support/redis-cluster.js';
import { freePorts } from '../support/ports.js';
import { runCase, seededRandom, type FuzzContext, type FuzzRecord } from './support/fuzz-cases.js';
import { sendRaw, signRaw, type Credentials } from './support/raw-http.js';
import { productionServersEnv, replicatedDatabase } from './support/production.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROOT = { user: 'fuzzroot', password: 'fuzz-root-password-0123' };
/** Requests per run (the issue asks for at least 5 000); STRATA_FUZZ_SEED replays a run. */
const REQUESTS = Number(process.env.STRATA_FUZZ_REQUESTS ?? 5000);
const SEED = Number(process.env.STRATA_FUZZ_SEED ?? randomInt(2 ** 31));
/** The production-servers run shares the suite's time with the embedded one. */
const PRODUCTION_REQUESTS = Number(process.env.STRATA_FUZZ_PRODUCTION_REQUESTS ?? 3000);
const WORKERS = 8;
/** Categories whose every request is a write that must be refused (cut bodies get no answer at all). */
const MUST_REJECT = new Set(['auth', 'digest', 'framing', 'cut', 'refused-body', 'form-cut']);
/** Longest wait for an answer: past the body idle limit (20 s), which answers a body that stopped arriving. */
const DEADLINE_MS = 30_000;
const md5Hex = (b: Buffer) => createHash('md5').update(b).digest('hex');

/**
 * The seeded fault-and-fuzz suite: thousands of malformed, cut, unauthenticated and misused requests
 * against `npm start`'s process (the object store), as a hostile or unlucky client sends them. It
 * passes when no answer is a 5xx other than 501/503, nothing hangs, no answer is lost to a reset, the process
 * stays up, another tenant's objects come through intact, every write that had to be refused left nothing
 * behind and every write answered 200 stored its object.
 */
describe('e2e: fault-and-fuzz suite (seeded)', function () {
  this.timeout(20 * 60_000);
  const cleanups: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });

  it(`npm start (embedded servers): ${REQUESTS} hostile requests, no 5xx, no hang, no partial state (seed ${SEED})`, async () => {
    await fuzzRun(REQUESTS, {}, cleanups);
  });

  it(`production servers (PostgreSQL primary + replica, Redis Cluster, RabbitMQ): ${PRODUCTION_REQUESTS} requests (seed ${SEED})`, async () => {
    const [pgh, redis] = await Promise.all([sharedPgReplica(), sharedRedisCluster()]);
    const database = `fuzz_${randomBytes(4).toString('hex')}`;
    const dbUrl = await replicatedDatabase(pgh, database);
    const names = new RabbitNames();
    names.queue(CONTROL_PLANE_QUEUE);
    cleanups.push(() => names.cleanup());
    await fuzzRun(PRODUCTION_REQUESTS, productionServersEnv(pgh, dbUrl, redis, `${database}:`, names), cleanups);
  });
});

/** Start the standalone process with `env` added, set up two tenants, send `requests` cases' worth of requests, check. */
async function fuzzRun(requests: number, env: NodeJS.ProcessEnv, cleanups: Array<() => Promise<unknown>>): Promise<void> {
  console.log(`    fault-and-fuzz seed ${SEED} (replay: STRATA_FUZZ_SEED=${SEED})`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-fuzz-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const [port, dataPlane, controlPlane, ...aiPorts] = await freePorts(6);
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'images/standalone/src/main.ts')], {
    cwd: repo,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      STRATA_DATA_DIR: dataDir,
      STRATA_HOST: '127.0.0.1',
      STRATA_GATEWAY_PORT: String(port),
      STRATA_DATA_PLANE_PORT: String(dataPlane),
      STRATA_CONTROL_PLANE_PORT: String(controlPlane),
      STRATA_MODEL_SERVER_PORT: String(aiPorts[0]),
      STRATA_POEM_APP_PORT: String(aiPorts[1]),
      STRATA_IMAGE_SEARCH_PORT: String(aiPorts[2]),
      STRATA_DISABLED_SERVICES: 'model-server,poem-app,image-search',
      STRATA_ROOT_USER: ROOT.user,
      STRATA_ROOT_PASSWORD: ROOT.password,
      STRATA_PURGE_SCHEDULE: 'off',
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(async () => {
    if (proc.exitCode !== null) return;
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
  });
  let logTail = '';
  const keepTail = (c: Buffer) => {
    logTail = (logTail + c.toString()).slice(-20_000);
  };
  proc.stdout!.on('data', keepTail);
  proc.stderr!.on('data', keepTail);
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilHealthy(endpoint, proc, () => logTail);

  const host = `127.0.0.1:${port}`;
  const attacker = await createUser(endpoint, 'fuzz-alice');
  const victim = await createUser(endpoint, 'fuzz-bob');
  const signed = (creds: Credentials, method: string, target: string, body?: Buffer) =>
    sendRaw(port!, signRaw({ method, target, headers: body ? [['content-length', String(body.length)]] : [], body }, host, creds), 30_000);
  const attackerBucket = 'fuzz-alice-bucket';
  const victimBucket = 'fuzz-bob-bucket';
  expect(await statusOf(signed(attacker, 'PUT', `/${attackerBucket}`))).to.equal(200);
  expect(await statusOf(signed(victim, 'PUT', `/${victimBucket}`))).to.equal(200);
  // An empty bucket may rightly be deleted by a fuzzed DELETE (S3 ignores unknown query parameters), which
  // would leave nothing to check for leftovers; an object no fuzzed key can name keeps it non-empty.
  const anchor = { key: 'anchor/keeps-the-bucket', body: Buffer.from('anchor') };
  expect(await statusOf(signed(attacker, 'PUT', `/${attackerBucket}/${anchor.key}`, anchor.body))).to.equal(200);
  const setup = new Map<string, string>();
  const setupRng = seededRandom(SEED);
  for (let i = 0; i < 12; i++) {
    const body = setupRng.bytes(setupRng.pick([0, 1, 4096, 200_000]));
    const key = `setup/object-${i}.bin`;
    expect(await statusOf(signed(victim, 'PUT', `/${victimBucket}/${key}`, body))).to.equal(200);
    setup.set(key, md5Hex(body));
  }

  const records: FuzzRecord[] = [];
  const ctx: FuzzContext = {
    port: port!,
    host,
    attacker,
    attackerBucket,
    victim,
    victimBucket,
    victimKeys: [...setup.keys()],
    mustNotExist: new Set(),
    mustExist: new Set(),
    record: (r) => records.push(r),
    deadlineMs: DEADLINE_MS,
  };
  let next = 0;
  const worker = async () => {
    while (records.length < requests && proc.exitCode === null) {
      const n = next++;
      await runCase(seededRandom((SEED ^ Math.imul(n + 1, 0x9e3779b1)) >>> 0), ctx, n);
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));

  const statuses = new Map<string, number>();
  for (const r of records) {
    const k = `${r.category} ${r.outcome.kind === 'answered' ? r.outcome.status : r.outcome.kind}`;
    statuses.set(k, (statuses.get(k) ?? 0) + 1);
  }
  console.log(
    `    ${records.length} requests in ${next} cases: ${[...statuses]
      .sort()
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ')}`,
  );

  // The process stays up and answers.
  expect(proc.exitCode, `the process exited; its log:\n${logTail}`).to.equal(null);
  expect((await fetch(`${endpoint}/healthz`)).status).to.equal(200);
  // No 5xx but the refusals by design, no hang, no answer lost to a reset (a client that cuts its own request gets none).
  const bad = records.filter(
    (r) =>
      r.outcome.kind === 'hang' ||
      (r.outcome.kind === 'reset' && r.category !== 'cut') ||
      // A connection closed without an answer loses it too; only a client that half-closed (broken framing:
      // Node's server then drops what it still serves) or cut its request may see that.
      (r.outcome.kind === 'closed' && r.category !== 'cut' && r.category !== 'framing') ||
      (r.outcome.kind === 'answered' && r.outcome.status >= 500 && r.outcome.status !== 501 && r.outcome.status !== 503),
  );
  const describe = (r: FuzzRecord) =>
    `${r.category} ${r.label}: ${r.outcome.kind === 'answered' ? `${r.outcome.status} ${r.outcome.body.toString().slice(0, 200)}` : r.outcome.kind}`;
  expect(bad.map(describe), `seed ${SEED}; log tail:\n${logTail.slice(-4000)}`).to.deep.equal([]);
  expect(records.length).to.be.at.least(requests);
  // Writes that had to be refused were: no 2xx for a bad signature, a bad digest or broken framing.
  const accepted = records.filter((r) => MUST_REJECT.has(r.category) && r.outcome.kind === 'answered' && r.outcome.status < 300);
  expect(accepted.map(describe), `seed ${SEED}`).to.deep.equal([]);

  // The other tenant's objects: exactly what was put, byte for byte.
  for (const [key, md5] of setup) {
    const got = await signed(victim, 'GET', `/${victimBucket}/${key}`);
    expect(got.kind === 'answered' && got.status, key).to.equal(200);
    expect(got.kind === 'answered' && md5Hex(got.body), key).to.equal(md5);
  }
  expect(await listKeys(signed, victim, victimBucket)).to.deep.equal([...setup.keys()].sort());
  // Every write that had to be refused left nothing behind.
  const stored = new Set(await listKeys(signed, attacker, attackerBucket));
  expect(stored.has(anchor.key), 'the attacker bucket kept its anchor object').to.equal(true);
  const leftovers = [...ctx.mustNotExist].filter((raw) => stored.has(raw) || stored.has(decodeOrRaw(raw)));
  expect(leftovers, `seed ${SEED}`).to.deep.equal([]);
  // Every write answered 200 stored its object (an answer on a connection is its own request's).
  expect(
    [...ctx.mustExist].filter((key) => !stored.has(key)),
    `seed ${SEED}`,
  ).to.deep.equal([]);
  // eslint-disable-next-line no-control-regex
  expect([...stored].filter((k) => /[\u0000-\u001f\u007f\ufffd]/.test(k))).to.deep.equal([]);
  // The last-resort handler saw nothing.
  const metrics = await (await fetch(`${endpoint}/metrics`)).text();
  for (const m of metrics.matchAll(/^(strata_\w*uncaught\w*)(?:\{[^}]*\})? (\S+)$/gm))
    expect(Number(m[2]), `${m[1]}; log tail:\n${logTail.slice(-6000)}`).to.equal(0);
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
}

function decodeOrRaw(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

async function statusOf(p: Promise<Awaited<ReturnType<typeof sendRaw>>>): Promise<number> {
  const o = await p;
  return o.kind === 'answered' ? o.status : -1;
}

async function waitUntilHealthy(endpoint: string, proc: ChildProcess, log: () => string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) throw new Error(`the platform exited (${proc.exitCode}) before it was healthy:\n${log()}`);
    const ok = await fetch(`${endpoint}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the platform did not become healthy in 120 s');
}

async function createUser(endpoint: string, username: string): Promise<Credentials> {
  const login = await fetch(`${endpoint}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: ROOT.user, password: ROOT.password }),
  });
  const token = ((await login.json()) as { data: { token: string } }).data.token;
  const res = await fetch(`${endpoint}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: `${username}-password-1` }),
  });
  expect(res.status).to.equal(201);
  const { accessKey, secretKey } = ((await res.json()) as { data: { accessKey: string; secretKey: string } }).data;
  return { accessKey, secret: secretKey };
}

/** Every key of a bucket (ListObjectsV2 pages, keys URL-encoded on the wire and decoded here). */
async function listKeys(signed: (c: Credentials, m: string, t: string) => ReturnType<typeof sendRaw>, creds: Credentials, bucket: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const out = await signed(creds, 'GET', `/${bucket}?list-type=2&encoding-type=url${token ? `&continuation-token=${encodeURIComponent(token)}` : ''}`);
    if (out.kind !== 'answered' || out.status !== 200) throw new Error(`listing ${bucket} failed: ${out.kind === 'answered' ? out.status : out.kind}`);
    const xml = out.body.toString();
    for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(decodeURIComponent(m[1]!.replace(/\+/g, ' ')));
    token = /<IsTruncated>true<\/IsTruncated>/.test(xml) ? /<NextContinuationToken>([^<]+)<\/NextContinuationToken>/.exec(xml)?.[1] : undefined;
  } while (token);
  return keys.sort();
}
