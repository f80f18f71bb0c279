/**
 * What the benchmarks of one standalone process share (get-profile, get-ab, put-profile, large-objects,
 * large-threads): starting a checkout's server, presigned S3 requests to it, its bench bucket and objects,
 * the CPU its threads used (/proc), and the summary of a V8 CPU profile's samples.
 */
import { type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import * as thisCheckoutStacks from './stacks.js';
import { cleanEnv, ROOT, spawnEntrypoint, standaloneSettings, stopAll, waitReady } from './stacks.js';
import { checkTargets } from './wrk.js';

const TICK_MS = 10; // USER_HZ: /proc counts CPU time in 1/100 s

/** The machine's load averages (1, 5, 15 min), for the line that reports a figure. */
export function loadAverages(): string {
  return os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ');
}

/** User + system CPU ms from the fields of a /proc stat line after its `(comm)`. */
function statCpuMs(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** CPU seconds of a process's main thread (its event loop; the process's figure adds GC helpers and workers). */
export async function mainThreadSeconds(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8').catch(() => '');
  return stat ? statCpuMs(stat) / 1000 : 0;
}

/** Per thread id of `pid`: its name, CPU ms (utime + stime) and ms waited runnable for a core (schedstat's second field). */
export async function threadCpu(pid: number): Promise<Map<number, { name: string; ms: number; waitedMs: number }>> {
  const out = new Map<number, { name: string; ms: number; waitedMs: number }>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const sched = (await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0 0 0')).trim().split(' ').map(Number);
    out.set(Number(tid), { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ms: statCpuMs(stat), waitedMs: (sched[1] ?? 0) / 1e6 });
  }
  return out;
}

/** Presigned URLs (SigV4 query auth as the root user) to `origin`. */
export type Signer = (method: string, p: string, extra?: Partial<Parameters<typeof presignUrl>[0]>) => string;

export function signer(origin: string): Signer {
  return (method, p, extra = {}) =>
    presignUrl({ method, origin, path: p, accessKey: ROOT.user, secret: ROOT.password, region: 'us-east-1', expiresSeconds: 7200, ...extra });
}

/** A running standalone server (object store only) of one checkout. */
export interface BenchServer {
  child: ChildProcess;
  origin: string;
  sign: Signer;
  /** The path and query of a presigned request for `key` of the bench bucket (what wrk's targets are). */
  target(method: string, key: string): string;
  exited: Promise<unknown>;
}

/**
 * `serverRepo`'s standalone process (its data under `dataDir`), ready, with the bench bucket created;
 * `nodeArgs` go before the entrypoint (e.g. --cpu-prof).
 */
export async function startBenchServer(serverRepo: string, dataDir: string, nodeArgs: string[] = []): Promise<BenchServer> {
  const settings = await standaloneSettings(dataDir);
  const child = spawnEntrypoint('images/standalone/src/main.ts', cleanEnv(settings.env), { repo: serverRepo, nodeArgs });
  const exited = new Promise((r) => child.once('exit', r));
  const origin = `http://127.0.0.1:${settings.gatewayPort}`;
  const sign = signer(origin);
  const target = (method: string, key: string) => sign(method, `/bench/${key}`).slice(origin.length);
  try {
    await waitReady(origin, child);
    await checkTargets({ origin, method: 'PUT', targets: [target('PUT', '')] });
  } catch (err) {
    await stopAll([child]);
    throw err;
  }
  return { child, origin, sign, target, exited };
}

/** The keys of the small-object benchmarks (`small/<i>.bin`), each stored with a body of `bytes` random bytes. */
export async function putSmallObjects(server: BenchServer, count: number, bytes: number): Promise<string[]> {
  const keys = Array.from({ length: count }, (_, i) => `small/${i}.bin`);
  await checkTargets({ origin: server.origin, method: 'PUT', targets: keys.map((k) => server.target('PUT', k)), body: randomBytes(bytes) });
  return keys;
}

/** The gateway's kept-answer lookups so far (its metrics). */
export async function answerLookups(origin: string): Promise<{ hits: number; misses: number }> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const count = (name: string) => Number(new RegExp(`^${name}\\{[^}]*cache="gateway-objects"[^}]*\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { hits: count('strata_cache_hits_total'), misses: count('strata_cache_misses_total') };
}

/** One request with a whole body; resolves with the status. */
export function send(method: string, url: string, body?: Buffer, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, 'content-length': String(body?.length ?? 0) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Creates each bucket; the one named `sealed` gets default encryption (SSE-S3). */
export async function createLargeBuckets(sign: Signer, buckets: string[]): Promise<void> {
  for (const b of buckets) if ((await send('PUT', sign('PUT', `/${b}`))) !== 200) throw new Error(`CreateBucket ${b}`);
  if (!buckets.includes('sealed')) return;
  const config = Buffer.from(
    '<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>AES256</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>',
  );
  const md5 = createHash('md5').update(config).digest('base64');
  const url = sign('PUT', '/sealed', { extraQuery: [['encryption', '']], headers: { 'content-md5': md5 } });
  if ((await send('PUT', url, config, { 'content-md5': md5 })) !== 200) throw new Error('PutBucketEncryption');
  await new Promise((r) => setTimeout(r, 2100)); // bucket records are cached for 2 s
}

/** What startLargeBench needs of stacks.ts: this checkout's, or a baseline checkout's (its server and settings). */
export type StackHelpers = Pick<typeof thisCheckoutStacks, 'cleanEnv' | 'spawnEntrypoint' | 'standaloneSettings' | 'stopAll' | 'waitReady'>;

/** The standalone server of a large-object benchmark, its buckets, and the body file. */
export interface LargeBench {
  child: ChildProcess;
  sign: Signer;
  /** A file of the body's bytes, and its size. */
  file: string;
  size: number;
  /** Stops the server and removes the data and the file. */
  close(): Promise<void>;
}

/** The standalone process (as `npm start`, object store only) of `stacks`' checkout, `buckets` created, a body of `mib` MiB written. */
export async function startLargeBench(name: string, buckets: string[], mib: number, stacks: StackHelpers = thisCheckoutStacks): Promise<LargeBench> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `${name}-`));
  const settings = await stacks.standaloneSettings(path.join(dir, 'data'));
  const child = stacks.spawnEntrypoint('images/standalone/src/main.ts', stacks.cleanEnv(settings.env));
  const sign = signer(`http://127.0.0.1:${settings.gatewayPort}`);
  const close = async () => {
    await stacks.stopAll([child]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await stacks.waitReady(`http://127.0.0.1:${settings.gatewayPort}`, child);
    await createLargeBuckets(sign, buckets);
    const file = path.join(dir, 'large.bin');
    await writeRandomFile(file, mib);
    return { child, sign, file, size: mib * 1048576, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A file of `mib` MiB of random bytes (the large benchmarks' body). */
export function writeRandomFile(file: string, mib: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const out = createWriteStream(file);
    for (let i = 0; i < mib; i++) out.write(randomBytes(1048576));
    out.end(() => resolve());
    out.on('error', reject);
  });
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
/** A V8 CPU profile (`node --cpu-prof`). */
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  endTime: number;
}

/** The profile files `node --cpu-prof` wrote to `dir`, the main thread's first (worker threads' are numbered after it). */
export async function profileFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile')).sort((a, b) => a.split('.')[4]!.localeCompare(b.split('.')[4]!));
}

export async function readProfile(file: string): Promise<CpuProfile> {
  return JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
}

/**
 * The samples taken between `fromEndUs` and `untilEndUs` microseconds before the profile's end (the load
 * run: not the start, the setup or the stop), each as its node, with the node's parent lookup.
 */
export function samplesBetween(
  profile: CpuProfile,
  fromEndUs: number,
  untilEndUs: number,
): { nodes: ProfileNode[]; byId: Map<number, ProfileNode>; parent: Map<number, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const nodes: ProfileNode[] = [];
  let t = profile.endTime;
  for (let i = profile.timeDeltas.length - 1; i >= 0; i--) {
    const ago = profile.endTime - t;
    if (ago <= fromEndUs && ago >= untilEndUs) nodes.push(byId.get(profile.samples[i]!)!);
    t -= profile.timeDeltas[i]!;
  }
  return { nodes, byId, parent };
}

/** A profile's URL relative to `repo` (a package's from node_modules/ on). */
export function shortUrl(url: string, repo: string): string {
  return url
    .replace(/^file:\/\//u, '')
    .replace(`${repo}/`, '')
    .replace(/.*node_modules\//u, 'node_modules/');
}

/** Where a sample's function is: `name file:line`. */
export function frameName(node: ProfileNode, repo: string): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${shortUrl(url, repo)}:${lineNumber + 1}`;
}

/** Counts as percentages of `total`, largest first. */
export function ranked(counts: Map<string, number>, total: number): Array<[string, number]> {
  return [...counts].map(([k, n]): [string, number] => [k, (100 * n) / Math.max(1, total)]).sort((a, b) => b[1] - a[1]);
}
