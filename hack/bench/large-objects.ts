/**
 * Large objects through `npm start` (the standalone process as its own child, object store only): PUT and
 * GET of one object with curl (SigV4 presigned URLs), into a plain bucket and into one with default
 * encryption (SSE-S3), alternated, and the server process's CPU per MiB besides the wall-clock rate. On a
 * shared machine the CPU per MiB is the steadier figure: it says what a transfer costs whatever else runs.
 *
 *   npx tsx hack/bench/large-objects.ts                  # ROUNDS=3 LARGE_MIB=256
 *   BENCH_CPU_PROF=/tmp/prof npx tsx hack/bench/large-objects.ts   # also a V8 CPU profile of the server
 *   BUCKETS=plain npx tsx hack/bench/large-objects.ts    # only the plain bucket
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { cleanEnv, cpuSeconds, ROOT, spawnEntrypoint, standaloneSettings, stopAll, waitReady } from './stacks.js';
import { curlTransfer } from './transfer.js';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const MIB = Number(process.env.LARGE_MIB ?? 256);
const BUCKETS = (process.env.BUCKETS ?? 'plain,sealed').split(',');

/** CPU seconds of a process's main thread (its event loop), from /proc/<pid>/task/<pid>/stat. */
async function mainThreadSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return stat ? (Number(fields[11]) + Number(fields[12])) / 100 : 0;
}

function send(method: string, url: string, body?: Buffer, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, 'content-length': String(body?.length ?? 0) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-large-'));
const settings = await standaloneSettings(path.join(dir, 'data'));
const child = spawnEntrypoint('images/standalone/src/main.ts', cleanEnv(settings.env));
const origin = `http://127.0.0.1:${settings.gatewayPort}`;
const sign = (method: string, p: string, extra: Partial<Parameters<typeof presignUrl>[0]> = {}) =>
  presignUrl({ method, origin, path: p, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 3600, ...extra });
try {
  await waitReady(origin, child);
  for (const b of BUCKETS) if ((await send('PUT', sign('PUT', `/${b}`))) !== 200) throw new Error(`CreateBucket ${b}`);
  if (BUCKETS.includes('sealed')) {
    const config = Buffer.from(
      '<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>',
    );
    const md5 = createHash('md5').update(config).digest('base64');
    const url = sign('PUT', '/sealed', { extraQuery: [['encryption', '']], headers: { 'content-md5': md5 } });
    if ((await send('PUT', url, config, { 'content-md5': md5 })) !== 200) throw new Error('PutBucketEncryption');
    await new Promise((r) => setTimeout(r, 2100)); // bucket records are cached for 2 s
  }
  const file = path.join(dir, 'large.bin');
  await new Promise<void>((resolve, reject) => {
    const out = createWriteStream(file);
    for (let i = 0; i < MIB; i++) out.write(randomBytes(1048576));
    out.end(() => resolve());
    out.on('error', reject);
  });
  const size = MIB * 1048576;
  const results: Record<string, Array<[number, number, number]>> = {};
  const measure = async (name: string, run: () => Promise<number>) => {
    const cpu = await cpuSeconds(child.pid);
    const main = await mainThreadSeconds(child.pid!);
    const from = process.hrtime.bigint() / 1000n;
    const rate = await run();
    // Windows for reading a CPU profile by operation (the profile's timestamps are this same monotonic clock, in µs).
    if (process.env.BENCH_CPU_PROF) console.error(`window ${name.replaceAll(' ', '_')} ${from} ${process.hrtime.bigint() / 1000n}`);
    (results[name] ??= []).push([rate, (((await cpuSeconds(child.pid)) - cpu) * 1000) / MIB, (((await mainThreadSeconds(child.pid!)) - main) * 1000) / MIB]);
  };
  // A first PUT and GET of each, unmeasured (the first large upload allocates the pools, starts the MD5 thread).
  for (const b of BUCKETS) {
    await curlTransfer('PUT', sign('PUT', `/${b}/large`), size, file);
    await curlTransfer('GET', sign('GET', `/${b}/large`), size);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of round % 2 ? [...BUCKETS].reverse() : BUCKETS) {
      await measure(`PUT ${MIB} MiB ${b}`, () => curlTransfer('PUT', sign('PUT', `/${b}/large`), size, file));
      await measure(`GET ${MIB} MiB ${b}`, () => curlTransfer('GET', sign('GET', `/${b}/large`), size));
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(
    `large objects through npm start — ${os.cpus().length} cores, ${ROUNDS} rounds, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  console.log('                       MiB/s (median; rounds)        server CPU ms/MiB, all threads     its main thread (event loop)');
  const cell = (v: number[], digits: number) => `${median(v).toFixed(digits)} (${v.map((x) => x.toFixed(digits)).join(' ')})`;
  for (const [name, values] of Object.entries(results)) {
    const column = (i: number) => values.map((v) => v[i]!);
    console.log(`${name.padEnd(22)} ${cell(column(0), 0).padEnd(30)} ${cell(column(1), 2).padEnd(34)} ${cell(column(2), 2)}`);
  }
} finally {
  await stopAll([child]);
  await rm(dir, { recursive: true, force: true });
}
