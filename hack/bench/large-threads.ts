/**
 * Where a large transfer's CPU goes, thread by thread: the standalone process (as `npm start`, object
 * store only) takes N curl transfers of 256 MiB (SigV4 presigned URLs) into a plain bucket or one with
 * default encryption (SSE-S3), and the CPU each of its threads used per MiB (/proc/<pid>/task/<tid>/stat)
 * is printed with the rates, and the time its busiest threads waited runnable for a core (schedstat: on a
 * shared host the threads' share of the cores, not their CPU, sets the rate). BENCH_REPO runs another
 * checkout's server (and its bench helpers), e.g. a baseline from `git archive`; alternate the two.
 *
 *   npx tsx hack/bench/large-threads.ts                          # BUCKET=plain OP=PUT N=3
 *   BENCH_REPO=/tmp/base BUCKET=sealed OP=GET npx tsx hack/bench/large-threads.ts
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REPO = path.resolve(process.env.BENCH_REPO ?? here);
const MIB = 256;
const N = Number(process.env.N ?? 3);
const BUCKET = process.env.BUCKET ?? 'plain';
const OP = process.env.OP ?? 'PUT';

type Stacks = typeof import('./stacks.js');
const { presignUrl } = (await import(path.join(REPO, 'images/gateway/src/auth/sigv4.ts'))) as typeof import('../../images/gateway/src/auth/sigv4.js');
const { cleanEnv, ROOT, spawnEntrypoint, standaloneSettings, stopAll, waitReady } = (await import(path.join(REPO, 'hack/bench/stacks.ts'))) as Stacks;
const { curlTransfer } = (await import(path.join(REPO, 'hack/bench/transfer.ts'))) as typeof import('./transfer.js');

/** Per thread id: CPU ms (utime + stime) and ms waited runnable (schedstat's second field). */
async function threads(pid: number): Promise<Map<string, { cpu: number; waited: number }>> {
  const m = new Map<string, { cpu: number; waited: number }>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const sched = (await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0 0 0')).trim().split(' ').map(Number);
    m.set(tid === String(pid) ? 'main' : `thread ${tid}`, { cpu: (Number(f[11]) + Number(f[12])) * 10, waited: (sched[1] ?? 0) / 1e6 });
  }
  return m;
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

const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-large-threads-'));
const settings = await standaloneSettings(path.join(dir, 'data'));
const child = spawnEntrypoint('images/standalone/src/main.ts', cleanEnv(settings.env));
const origin = `http://127.0.0.1:${settings.gatewayPort}`;
const sign = (method: string, p: string, extra: Partial<Parameters<typeof presignUrl>[0]> = {}) =>
  presignUrl({ method, origin, path: p, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 3600, ...extra });
try {
  await waitReady(origin, child);
  if ((await send('PUT', sign('PUT', `/${BUCKET}`))) !== 200) throw new Error(`CreateBucket ${BUCKET}`);
  if (BUCKET === 'sealed') {
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
  const transfer = () =>
    OP === 'PUT' ? curlTransfer('PUT', sign('PUT', `/${BUCKET}/large`), size, file) : curlTransfer('GET', sign('GET', `/${BUCKET}/large`), size);
  // One PUT and GET unmeasured: pools allocated, threads started.
  await curlTransfer('PUT', sign('PUT', `/${BUCKET}/large`), size, file);
  await curlTransfer('GET', sign('GET', `/${BUCKET}/large`), size);
  const before = await threads(child.pid!);
  const rates: number[] = [];
  for (let i = 0; i < N; i++) rates.push(await transfer());
  const after = await threads(child.pid!);
  const used = [...after].map(([name, v]) => ({
    name,
    cpu: (v.cpu - (before.get(name)?.cpu ?? 0)) / (N * MIB),
    waited: v.waited - (before.get(name)?.waited ?? 0),
  }));
  const wall = rates.reduce((a, r) => a + MIB / r, 0) * 1000;
  const busiest = used.sort((a, b) => b.cpu - a.cpu).filter((t) => t.cpu >= 0.05);
  const total = used.reduce((a, t) => a + t.cpu, 0);
  console.log(`${REPO} ${OP} ${MIB} MiB ${BUCKET}, load ${os.loadavg()[0]!.toFixed(1)}: MiB/s ${rates.map((r) => r.toFixed(0)).join(' ')}`);
  console.log(`  CPU ms/MiB ${total.toFixed(2)} in all; ${busiest.map((t) => `${t.name} ${t.cpu.toFixed(2)}`).join(', ')}`);
  console.log(
    `  of ${wall.toFixed(0)} ms, waited runnable: ${busiest
      .slice(0, 4)
      .map((t) => `${t.name} ${t.waited.toFixed(0)} ms`)
      .join(', ')}`,
  );
} finally {
  await stopAll([child]);
  await rm(dir, { recursive: true, force: true });
}
