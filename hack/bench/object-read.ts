/**
 * What ObjectService.read costs in CPU, in process (no HTTP): reads of a 4 KiB object (one chunk, from
 * the filesystem backend's small-blob cache) and of a large one (1 MiB read chunks), each stream read to
 * its end, for two checkouts in alternating rounds (each round meets the same load). CPU time of this
 * process (process.cpuUsage) per read and per MiB; medians over the rounds.
 *
 *   BENCH_REPO_A=/tmp/base npx tsx hack/bench/object-read.ts      (B defaults to this checkout)
 *   ROUNDS=5 SMALL_READS=20000 LARGE_MIB=64 LARGE_READS=4 ...     (the defaults)
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { loadAverages } from './standalone-bench.js';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const SMALL_READS = Number(process.env.SMALL_READS ?? 20_000);
const LARGE_MIB = Number(process.env.LARGE_MIB ?? 64);
const LARGE_READS = Number(process.env.LARGE_READS ?? 4);
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

type Reader = (size: 'small' | 'large') => Promise<Readable>;

/** ObjectService.read of `repo` over its FsBackend (with a small-blob cache) in `dir`, on a 4 KiB and a large object. */
async function readerOf(repo: string, dir: string): Promise<Reader> {
  const src = (p: string) => path.join(repo, 'images', p);
  const { FsBackend } = (await import(src('data-plane/src/backends/fs-backend.ts'))) as typeof import('../../images/data-plane/src/backends/fs-backend.js');
  const { SmallBlobCache } = (await import(
    src('data-plane/src/backends/small-blob-cache.ts')
  )) as typeof import('../../images/data-plane/src/backends/small-blob-cache.js');
  const { ObjectService } = (await import(
    src('data-plane/src/uploads/object-service.ts')
  )) as typeof import('../../images/data-plane/src/uploads/object-service.js');
  const { dataPlaneMetrics } = (await import(src('data-plane/src/metrics.ts'))) as typeof import('../../images/data-plane/src/metrics.js');
  const kit = (await import(src('service-kit/src/index.ts'))) as typeof import('../../images/service-kit/src/index.js');
  const backend = new FsBackend(dir, { smallBlobs: new SmallBlobCache(64 * 1024 * 1024, 64 * 1024) });
  await mkdir(dir, { recursive: true });
  const source = path.join(dir, 'large.bin');
  await writeFile(source, randomBytes(LARGE_MIB * 1048576));
  const large = await backend.put(createReadStream(source), { expectedSize: LARGE_MIB * 1048576 });
  const small = await backend.put(createReadStream(source, { end: 4095 }), { expectedSize: 4096 });
  const unused = undefined as never;
  const service = new ObjectService(
    unused,
    unused,
    unused,
    unused,
    dataPlaneMetrics(new kit.Registry()),
    kit.createLogger('bench', 'silent'),
    () => new Date(),
  );
  const object = (blob: { locator: string; size: number }) =>
    ({ bucket: 'b', key: 'k', size: blob.size, locator: blob.locator, blobId: 1, backendKey: backend.key, owner: 'o' }) as Parameters<typeof service.read>[0];
  return (size) => service.read(object(size === 'small' ? small : large), backend);
}

async function drain(stream: Readable): Promise<void> {
  for await (const _ of stream);
}

/** CPU µs of this process over `run`. */
async function cpuUs(run: () => Promise<void>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const repos = { A: path.resolve(process.env.BENCH_REPO_A ?? here), B: path.resolve(process.env.BENCH_REPO_B ?? here) };
const work = await mkdtemp(path.join(os.tmpdir(), 'strata-object-read-'));
try {
  const readers = new Map<string, Reader>();
  for (const [name, repo] of Object.entries(repos)) readers.set(name, await readerOf(repo, path.join(work, name)));
  const figures = new Map<string, { small: number[]; large: number[] }>([...readers.keys()].map((n) => [n, { small: [], large: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...readers].reverse() : [...readers];
    for (const [name, read] of order) {
      const small = await cpuUs(async () => {
        for (let i = 0; i < SMALL_READS; i++) await drain(await read('small'));
      });
      const large = await cpuUs(async () => {
        for (let i = 0; i < LARGE_READS; i++) await drain(await read('large'));
      });
      figures.get(name)!.small.push(small / SMALL_READS);
      figures.get(name)!.large.push(large / 1000 / (LARGE_READS * LARGE_MIB));
      console.log(
        `round ${round} ${name}: ${(small / SMALL_READS).toFixed(2)} µs CPU per 4 KiB read, ${(large / 1000 / (LARGE_READS * LARGE_MIB)).toFixed(3)} ms per MiB`,
      );
    }
  }
  for (const [name, f] of figures) {
    console.log(
      `${name} ${repos[name as 'A' | 'B']}: medians ${median(f.small).toFixed(2)} µs CPU per 4 KiB read, ${median(f.large).toFixed(3)} ms CPU per MiB; load ${loadAverages()}`,
    );
  }
} finally {
  await rm(work, { recursive: true, force: true });
}
