/**
 * Where a large transfer's CPU goes, thread by thread: the standalone process (as `npm start`, object
 * store only) takes N curl transfers of 256 MiB (SigV4 presigned URLs) into a plain bucket or one with
 * default encryption (SSE-S3), and the CPU each of its threads used per MiB (/proc/<pid>/task/<tid>/stat)
 * is printed with the rates, and the time its busiest threads waited runnable for a core (schedstat: on a
 * shared host the threads' share of the cores, not their CPU, sets the rate). BENCH_REPO runs another
 * checkout's server (and its bench helpers), e.g. a baseline from `git archive`; alternate the two.
 *
 *   npx tsx hack/bench/large-threads.ts                          # BUCKET=plain OP=PUT N=3 LARGE_MIB=256
 *   BENCH_REPO=/tmp/base BUCKET=sealed OP=GET npx tsx hack/bench/large-threads.ts
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLargeBench, threadCpu } from './standalone-bench.js';
import { curlTransfer } from './transfer.js';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REPO = path.resolve(process.env.BENCH_REPO ?? here);
const MIB = Number(process.env.LARGE_MIB ?? 256);
const N = Number(process.env.N ?? 3);
const BUCKET = process.env.BUCKET ?? 'plain';
const OP = process.env.OP ?? 'PUT';

// The server side from REPO (its entrypoint and settings); the client side (requests, bucket setup) is this checkout's.
type Stacks = typeof import('./stacks.js');
const stacks = (await import(path.join(REPO, 'hack/bench/stacks.ts'))) as Stacks;

/** Per thread ('main' or 'thread <tid>'): CPU ms and ms waited runnable. */
async function threads(pid: number): Promise<Map<string, { cpu: number; waited: number }>> {
  const named = new Map<string, { cpu: number; waited: number }>();
  for (const [tid, t] of await threadCpu(pid)) named.set(tid === pid ? 'main' : `thread ${tid}`, { cpu: t.ms, waited: t.waitedMs });
  return named;
}

const { child, sign, file, size, close } = await startLargeBench('strata-large-threads', [BUCKET], MIB, stacks);
try {
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
  await close();
}
