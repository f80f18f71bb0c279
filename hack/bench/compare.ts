/**
 * The object store beside its baselines, in one run (issue 41's table): nginx with one worker (static
 * files and WebDAV PUT, no fsync), a bare Node.js http server answering 4 KiB from memory and streaming
 * 256 MiB to a file (fdatasync'd) and back (the runtime's own ceiling), s3rver (an npm S3 server, no fsync) and Strata (the standalone process,
 * object store only, durable). Prints the table, each server's figures as ratios of Strata's, and
 * the issue's "done when" bounds.
 *
 * Clients as the issue measured: wrk (1 thread, 16 connections) for 4 KiB, curl for 256 MiB; Strata
 * and s3rver through SigV4 presigned URLs. 4 KiB runs: GET over 1 000 keys, PUT of one key, PUT over
 * 1 000 keys with a different body each time. Every figure is the best of two rounds; a round runs
 * every server in turn, so drift of the host hits all alike.
 *
 *   npm run bench:compare                     (BENCH_SECONDS=10 per 4 KiB run)
 *   BENCH_SECONDS=3 npm run bench:compare     (quicker, noisier)
 *   BENCH_ONLY=small | big                    (only the 4 KiB runs, or only the 256 MiB transfers)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { freePort } from '../../test/support/ports.js';
import { startNginx } from './nginx-baseline.js';
import { cleanEnv, ROOT, spawnEntrypoint, standaloneSettings, stopAll, waitReady } from './stacks.js';
import { curlTransfer } from './transfer.js';
import { checkTargets, runWrk } from './wrk.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ONLY = process.env.BENCH_ONLY ?? 'all';
const ROUNDS = 2;
const KEYS = 1000;
const SMALL = 4096;
const BIG = 256 * 1024 * 1024;
const WRK = { connections: 16, threads: 1 };
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const COLUMNS = ['GET 4 KiB /s', 'PUT 4 KiB /s one key', 'PUT 4 KiB /s 1 000 keys, distinct bodies', 'GET 256 MiB MiB/s', 'PUT 256 MiB MiB/s'] as const;
type Column = (typeof COLUMNS)[number];

/** A server under test: request targets (path and query) for a key, and what it can be asked. */
interface Contender {
  name: string;
  origin: string;
  target(method: 'GET' | 'PUT', key: string): string;
  columns: readonly Column[];
  stop(): Promise<void>;
}

/** A SigV4 presigned target on `origin` for keys of bucket `bench`. */
function presigned(origin: string, accessKey: string, secret: string) {
  return (method: string, key: string) =>
    presignUrl({ method, origin, path: `/bench/${key}`, accessKey, secret, region: 'us-east-1', expiresSeconds: 7200 }).slice(origin.length);
}

async function startStrata(work: string): Promise<Contender> {
  const settings = await standaloneSettings(path.join(work, 'strata'));
  const child = spawnEntrypoint('images/standalone/src/main.ts', cleanEnv(settings.env));
  const origin = `http://127.0.0.1:${settings.gatewayPort}`;
  await waitReady(origin, child);
  const bucket = presignUrl({ method: 'PUT', origin, path: '/bench', accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 60 });
  await checkTargets({ origin, method: 'PUT', targets: [bucket.slice(origin.length)] });
  const target = presigned(origin, ROOT.user, ROOT.password);
  return { name: 'Strata `npm start`, object store only', origin, target, columns: COLUMNS, stop: () => stopAll([child]) };
}

async function startS3rver(work: string): Promise<Contender> {
  const port = await freePort();
  const dir = path.join(work, 's3rver');
  await mkdir(dir, { recursive: true });
  const bin = path.join(repo, 'node_modules/s3rver/bin/s3rver.js');
  const child = spawn(process.execPath, [bin, '-d', dir, '-a', '127.0.0.1', '-p', String(port), '--silent', '--configure-bucket', 'bench'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const origin = `http://127.0.0.1:${port}`;
  await untilAnswers(origin, child);
  // s3rver's default credentials (it checks the signature).
  return { name: 's3rver', origin, target: presigned(origin, 'S3RVER', 'S3RVER'), columns: COLUMNS, stop: () => stopAll([child]) };
}

/**
 * node:http as the runtime's own ceiling: 4 KiB answered from memory and small PUT bodies discarded; 256 MiB
 * PUT streamed to a file and fdatasync'd before the answer (durable, as Strata's), 256 MiB GET streamed from
 * that file in 1 MiB reads (as it stands in the page cache after the PUT, like nginx's).
 */
async function startBareNode(work: string): Promise<Contender> {
  const port = await freePort();
  const big = path.join(work, 'node-big.bin');
  const script = `const fs = require('node:fs');
const body = Buffer.alloc(${SMALL}, 97);
const big = ${JSON.stringify(big)};
require('node:http').createServer(async (req, res) => {
  const large = req.url === '/big.bin';
  if (req.method === 'PUT' && large) {
    const fh = await fs.promises.open(big, 'w');
    for await (const chunk of req) await fh.write(chunk);
    await fh.datasync(); await fh.close(); res.end(); return;
  }
  if (req.method === 'PUT') { req.resume(); req.on('end', () => { res.statusCode = 200; res.end(); }); return; }
  if (large) {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': fs.statSync(big).size });
    fs.createReadStream(big, { highWaterMark: 1 << 20 }).pipe(res); return;
  }
  res.setHeader('content-type', 'application/octet-stream'); res.end(body);
}).listen(${port}, '127.0.0.1');`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'inherit'] });
  const origin = `http://127.0.0.1:${port}`;
  await untilAnswers(origin, child);
  const columns = COLUMNS.filter((col) => col !== 'PUT 4 KiB /s 1 000 keys, distinct bodies');
  return { name: 'bare Node.js http', origin, target: (_m, key) => `/${key}`, columns, stop: () => stopAll([child]) };
}

async function startNginxOneWorker(work: string): Promise<Contender> {
  const nginx = await startNginx(path.join(work, 'nginx'), await freePort(), 1);
  return { name: 'nginx, 1 worker', origin: nginx.url, target: (_m, key) => `/${key}`, columns: COLUMNS, stop: () => nginx.stop() };
}

async function untilAnswers(origin: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${origin}: the process exited with ${child.exitCode}`);
    if (
      await fetch(origin, { method: 'HEAD' }).then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${origin} did not answer`);
}

async function writeRandomFile(file: string, bytes: number): Promise<void> {
  const out = createWriteStream(file);
  for (let left = bytes; left > 0; left -= 1 << 20) {
    if (!out.write(randomBytes(Math.min(left, 1 << 20)))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

/** One round of every column a contender offers; figures per column. */
async function round(c: Contender, bigFile: string, warm: boolean): Promise<Map<Column, number>> {
  const figures = new Map<Column, number>();
  const keys = Array.from({ length: KEYS }, (_, i) => `small/${i}.bin`);
  const small = randomBytes(SMALL);
  const wrk = async (method: 'GET' | 'PUT', targets: string[], bodies: 'one' | 'distinct', seconds = SECONDS) =>
    (await runWrk({ origin: c.origin, method, targets, body: method === 'PUT' ? small : undefined, bodies, seconds, ...WRK })).opsPerSec;
  if (ONLY !== 'big') {
    const gets = keys.map((k) => c.target('GET', k));
    const puts = keys.map((k) => c.target('PUT', k));
    if (warm) {
      await checkTargets({ origin: c.origin, method: 'PUT', targets: puts, body: small });
      await checkTargets({ origin: c.origin, method: 'GET', targets: gets, expectBytes: SMALL });
      await wrk('GET', gets, 'one', 2);
      await wrk('PUT', puts, 'distinct', 2);
    }
    figures.set('GET 4 KiB /s', await wrk('GET', gets, 'one'));
    figures.set('PUT 4 KiB /s one key', await wrk('PUT', [c.target('PUT', 'one.bin')], 'one'));
    if (c.columns.includes('PUT 4 KiB /s 1 000 keys, distinct bodies'))
      figures.set('PUT 4 KiB /s 1 000 keys, distinct bodies', await wrk('PUT', puts, 'distinct'));
  }
  if (ONLY !== 'small' && c.columns.includes('PUT 256 MiB MiB/s')) {
    const url = (method: 'GET' | 'PUT') => c.origin + c.target(method, 'big.bin');
    if (warm) await curlTransfer('PUT', url('PUT'), BIG, bigFile);
    figures.set('PUT 256 MiB MiB/s', await curlTransfer('PUT', url('PUT'), BIG, bigFile));
    figures.set('GET 256 MiB MiB/s', await curlTransfer('GET', url('GET'), BIG));
  }
  return figures;
}

function table(contenders: Contender[], best: Map<string, Map<Column, number>>): string[] {
  const strata = best.get(contenders.find((c) => c.name.startsWith('Strata'))!.name)!;
  const cell = (v: number | undefined) => (v === undefined ? '–' : v >= 100 ? String(Math.round(v)) : v.toFixed(1));
  const lines = [`| | ${COLUMNS.join(' | ')} |`, `|---|${COLUMNS.map(() => '---|').join('')}`];
  for (const c of contenders) lines.push(`| ${c.name} | ${COLUMNS.map((col) => cell(best.get(c.name)!.get(col))).join(' | ')} |`);
  for (const c of contenders.filter((x) => !x.name.startsWith('Strata'))) {
    const ratios = COLUMNS.map((col) => {
      const base = best.get(c.name)!.get(col);
      const ours = strata.get(col);
      return base && ours ? `${(ours / base).toFixed(2)}×` : '–';
    });
    lines.push(`| Strata ÷ ${c.name} | ${ratios.join(' | ')} |`);
  }
  return lines;
}

/** The issue's "done when" bounds, met or not. */
function bounds(best: Map<string, Map<Column, number>>, names: Record<'strata' | 'node' | 'nginx' | 's3rver', string>): string[] {
  const v = (who: keyof typeof names, col: Column) => best.get(names[who])?.get(col);
  const checks: Array<[string, number | undefined, number | undefined, number]> = [
    ['GET 4 KiB >= 0.5x bare Node', v('strata', 'GET 4 KiB /s'), v('node', 'GET 4 KiB /s'), 0.5],
    ['PUT 4 KiB 1 000 keys >= 2x s3rver', v('strata', COLUMNS[2]), v('s3rver', COLUMNS[2]), 2],
    ['PUT 4 KiB 1 000 keys >= 0.4x nginx', v('strata', COLUMNS[2]), v('nginx', COLUMNS[2]), 0.4],
    ['GET 256 MiB >= 0.9x nginx', v('strata', 'GET 256 MiB MiB/s'), v('nginx', 'GET 256 MiB MiB/s'), 0.9],
    // Not a bound of the issue: what Node itself streams from a cached file (no sendfile in node:http).
    ['(GET 256 MiB against bare Node, for reference) >= 0.9x', v('strata', 'GET 256 MiB MiB/s'), v('node', 'GET 256 MiB MiB/s'), 0.9],
    ['PUT 256 MiB >= 1.5x s3rver', v('strata', 'PUT 256 MiB MiB/s'), v('s3rver', 'PUT 256 MiB MiB/s'), 1.5],
  ];
  return checks
    .filter(([, ours, base]) => ours !== undefined && base !== undefined)
    .map(([what, ours, base, factor]) => `  ${what}: ${(ours! / base!).toFixed(2)}x, ${ours! >= factor * base! ? 'met' : 'NOT met'}`);
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'strata-compare-'));
  const loadBefore = os.loadavg();
  const contenders: Contender[] = [];
  try {
    const bigFile = path.join(work, 'big.bin');
    if (ONLY !== 'small') await writeRandomFile(bigFile, BIG);
    contenders.push(await startNginxOneWorker(work), await startBareNode(work), await startStrata(work), await startS3rver(work));
    const best = new Map(contenders.map((c) => [c.name, new Map<Column, number>()]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const c of contenders) {
        const figures = await round(c, bigFile, r === 0);
        console.error(`round ${r + 1}, ${c.name}: ${[...figures].map(([col, n]) => `${col} ${n.toFixed(1)}`).join(', ')}`);
        for (const [col, n] of figures) best.get(c.name)!.set(col, Math.max(best.get(c.name)!.get(col) ?? 0, n));
      }
    }
    const names = { nginx: contenders[0]!.name, node: contenders[1]!.name, strata: contenders[2]!.name, s3rver: contenders[3]!.name };
    const f1 = (n: number) => n.toFixed(1);
    console.log(
      [
        '',
        `Strata beside nginx, bare Node.js and s3rver — ${os.cpus().length} cores, loopback, wrk ${WRK.threads} thread ${WRK.connections} ` +
          `connections ${SECONDS} s, curl for 256 MiB, best of ${ROUNDS} rounds`,
        `load average (1, 5, 15 min) ${loadBefore.map(f1).join(' ')} before, ${os.loadavg().map(f1).join(' ')} after`,
        '',
        ...table(contenders, best),
        '',
        'done when (issue 41):',
        ...bounds(best, names),
        '',
      ].join('\n'),
    );
  } finally {
    for (const c of contenders.reverse()) await c.stop().catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
