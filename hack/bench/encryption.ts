/**
 * The cost of server-side encryption (issue #40): PUT and GET of 4 KiB and 256 MiB objects through the
 * standalone gateway (SigV4 presigned URLs), into a bucket with default encryption (SSE-S3, bucket
 * default so that the URLs carry no extra headers) against a plain bucket, in the same run, alternated.
 * 256 MiB transfers go through curl (far less CPU per MiB than the server); 4 KiB ones through a
 * keep-alive node:http client, sequential (one request in flight: latency, not the client, is measured).
 *
 *   npx tsx hack/bench/encryption.ts            # ROUNDS=3 LARGE_MIB=256 SMALL_N=300
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { startPlatform } from '../../images/standalone/src/platform.js';
import { curlTransfer } from './transfer.js';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const LARGE = Number(process.env.LARGE_MIB ?? 256) * 1048576;
const SMALL_N = Number(process.env.SMALL_N ?? 300);
const ROOT = { user: 'strata', password: 'strata-bench-password' };

const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-sse-bench-'));
const platform = await startPlatform(
  { dataDir: path.join(dir, 'data'), rootPassword: ROOT.password, ports: { gateway: 0, dataPlane: 0, controlPlane: 0 }, pgliteFsync: false, logLevel: 'warn' },
  (await import('../../images/standalone/src/platform.js')).OBJECT_STORE_SERVICES,
);
const origin = platform.urls.gateway!;
const url = (method: string, p: string) =>
  presignUrl({ method, origin, path: p, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 3600 });
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function request(method: string, target: string, body?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(target, { method, agent, headers: body ? { 'content-length': body.length } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function ok(method: string, p: string, body?: Buffer): Promise<void> {
  const status = await request(method, url(method, p), body);
  if (status !== 200) throw new Error(`${method} ${p}: ${status}`);
}

const sseConfig = Buffer.from(
  '<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>',
);
try {
  await ok('PUT', '/plain');
  await ok('PUT', '/sealed');
  // PutBucketEncryption needs Content-MD5 (signed with the URL).
  const md5 = createHash('md5').update(sseConfig).digest('base64');
  const encUrl = presignUrl({
    method: 'PUT',
    origin,
    path: '/sealed',
    extraQuery: [['encryption', '']],
    headers: { 'content-md5': md5 },
    accessKey: ROOT.user,
    secret: ROOT.password,
    region: 'us-east-1',
    expiresSeconds: 600,
  });
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request(encUrl, { method: 'PUT', headers: { 'content-md5': md5, 'content-length': sseConfig.length } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(sseConfig);
  });
  if (status !== 200) throw new Error(`PutBucketEncryption: ${status}`);
  await new Promise((r) => setTimeout(r, 2100)); // bucket records are cached for 2 s

  const file = path.join(dir, 'large.bin');
  await new Promise<void>((resolve, reject) => {
    const out = createWriteStream(file);
    for (let i = 0; i < LARGE / 1048576; i++) out.write(randomBytes(1048576));
    out.end(() => resolve());
    out.on('error', reject);
  });
  const small = randomBytes(4096);
  const results: Record<string, number[]> = {};
  const add = (name: string, v: number) => (results[name] ??= []).push(v);
  for (let round = 0; round < ROUNDS; round++) {
    for (const bucket of round % 2 ? ['sealed', 'plain'] : ['plain', 'sealed']) {
      add(`PUT 256 MiB ${bucket} MiB/s`, await curlTransfer('PUT', url('PUT', `/${bucket}/large`), LARGE, file));
      add(`GET 256 MiB ${bucket} MiB/s`, await curlTransfer('GET', url('GET', `/${bucket}/large`), LARGE));
      let t = process.hrtime.bigint();
      for (let i = 0; i < SMALL_N; i++) await ok('PUT', `/${bucket}/s${i % 50}`, small);
      add(`PUT 4 KiB ${bucket} ms`, Number(process.hrtime.bigint() - t) / 1e6 / SMALL_N);
      t = process.hrtime.bigint();
      for (let i = 0; i < SMALL_N; i++) await ok('GET', `/${bucket}/s${i % 50}`);
      add(`GET 4 KiB ${bucket} ms`, Number(process.hrtime.bigint() - t) / 1e6 / SMALL_N);
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`SSE-S3 (bucket default) vs plain — ${os.cpus().length} cores, ${ROUNDS} rounds, medians`);
  for (const [name, values] of Object.entries(results))
    console.log(`${name.padEnd(28)} ${median(values).toFixed(2)}   (${values.map((v) => v.toFixed(2)).join(' ')})`);
} finally {
  agent.destroy();
  await platform.stop();
  await rm(dir, { recursive: true, force: true });
}
