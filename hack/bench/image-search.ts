// Image search benchmark: the service's own double-buffered index on clustered 512-d unit vectors.
//
//   npm run bench:image-search                 # 200k and 1M vectors, IVF4096,PQ32x8 (heavy: run with nohup)
//   npm run bench:image-search -- --quick      # 20k and 50k vectors, IVF256,PQ32x8
//   options: --sizes=200000,1000000 --index=IVF4096,PQ32x8 --queries=1000 --nprobe=8,16,32,64,128
//   training knobs as the service takes them: IMAGE_SEARCH_TRAIN_NITER=25 IMAGE_SEARCH_TRAIN_PQ_NITER=...
//
// Per size: buffer add rate (ImageIndex.add: log append + fsync + manifest), merge = train + add (FAISS
// prints its k-means progress), main index bytes/vector (file and resident), QPS and recall@10 per nprobe
// with and without exact re-ranking, exact search beside it, then image encode throughput with the test
// CLIP model. Results go to stdout and test/artifacts/bench-image-search.json.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { faissBinding } from '../../images/image-search/src/index/faiss.js';

const FaissIndex = faissBinding();
import { ImageIndex, trainingOptionsFromEnv } from '../../images/image-search/src/index/image-index.js';
import { ClipEncoder } from '../../images/image-search/src/clip/encoder.js';
import { writeTestClipModel } from '../clip/test-clip-model.js';
import { embeddingLikeVectors } from '../../test/image-search/support/clustered-vectors.js';

const args = process.argv.slice(2);
const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const quick = args.includes('--quick');
const sizes = (option('sizes') ?? (quick ? '20000,50000' : '200000,1000000')).split(',').map(Number);
const indexString = option('index') ?? (quick ? 'IVF256,PQ32x8' : 'IVF4096,PQ32x8');
const queryCount = Number(option('queries') ?? (quick ? 200 : 1000));
const nprobes = (option('nprobe') ?? (quick ? '4,8,16,32' : '8,16,32,64,128')).split(',').map(Number);
// Candidates per result for exact re-ranking (the service's IMAGE_SEARCH_RERANK_FACTOR); several = a sweep.
const rerankFactors = (option('rerank-factors') ?? '10').split(',').map(Number);
// Queries in flight at once (as concurrent clients of the service): each runs on its own libuv thread.
const concurrency = Number(option('concurrency') ?? 1);
const d = 512;
const k = 10;
const training = trainingOptionsFromEnv();
const cpuSeconds = (from: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(from);
  return (used.user + used.system) / 1e6;
};

const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${msg}`);
const seconds = (from: number) => (performance.now() - from) / 1000;
const mb = () => process.memoryUsage().rss / 2 ** 20;

function recall(found: number[][], truth: number[][]): number {
  let hit = 0;
  truth.forEach((t, q) => {
    const set = new Set(t);
    found[q].forEach((id) => set.has(id) && hit++);
  });
  return hit / (truth.length * k);
}

interface SizeResult {
  vectors: number;
  index: string;
  buffer_add_vectors_per_s: number;
  merge: Record<string, unknown>;
  merge_seconds: number;
  merge_cpu_seconds: number;
  index_file_bytes_per_vector: number;
  memory: Record<string, number>;
  exact: { qps_single: number; qps_batch: number };
  runs: Array<{ nprobe: number; rerank: boolean; rerankFactor?: number; qps: number; recall_at_10: number }>;
}

async function benchSize(n: number): Promise<SizeResult> {
  log(`=== ${n} vectors, ${indexString} ===`);
  let t = performance.now();
  // Base and queries from the same clusters; queries are held out of the index.
  const all = embeddingLikeVectors(n + queryCount, d, Math.max(100, Math.floor(n / 200)), 7);
  const base = all.subarray(0, n * d);
  const queries = all.slice(n * d);
  log(`generated in ${seconds(t).toFixed(1)} s`);

  // Exact search beside it: ground truth and exact QPS.
  t = performance.now();
  const exact = new FaissIndex(d, 'IDMap2,Flat');
  await exact.addWithIds(
    base,
    BigInt64Array.from({ length: n }, (_, i) => BigInt(i)),
  );
  t = performance.now();
  const truthResult = await exact.search(queries, k);
  const exactBatch = queryCount / seconds(t);
  const truth = Array.from({ length: queryCount }, (_, q) => Array.from(truthResult.labels.subarray(q * k, q * k + k), Number));
  t = performance.now();
  const singles = Math.min(50, queryCount);
  for (let q = 0; q < singles; q++) await exact.search(queries.subarray(q * d, (q + 1) * d), k);
  const exactSingle = singles / seconds(t);
  log(`exact search: ${exactBatch.toFixed(0)} q/s batched, ${exactSingle.toFixed(1)} q/s one by one`);

  const dir = mkdtempSync(path.join(tmpdir(), 'strata-bench-image-search-'));
  try {
    const index = await ImageIndex.open({
      dir,
      dim: d,
      indexString,
      nprobe: 32,
      bufferThreshold: 1000,
      verboseTraining: true,
      training,
      logger: pino({ level: 'warn' }),
    });
    // Buffer adds, as POST /api/index/add does them (batches of 1000).
    t = performance.now();
    const batch = 1000;
    for (let start = 0; start < n; start += batch) {
      const end = Math.min(n, start + batch);
      await index.add(
        base.subarray(start * d, end * d),
        Array.from({ length: end - start }, (_, i) => `v/${start + i}.jpg`),
      );
      if ((start / batch) % 100 === 99) log(`  buffer add ${end}/${n} (${(end / seconds(t)).toFixed(0)} vectors/s)`);
    }
    const addRate = n / seconds(t);
    log(`buffer add: ${addRate.toFixed(0)} vectors/s`);

    // Merge trains the IVF-PQ index from the stored vectors and adds them all.
    t = performance.now();
    const cpu = process.cpuUsage();
    index.merge();
    const ticker = setInterval(() => {
      const job = index.currentJob;
      if (job) log(`  merge: ${job.phase} ${(job.progress * 100).toFixed(0)}% (${seconds(t).toFixed(0)} s)`);
    }, 10_000);
    const job = await index.waitForJob();
    clearInterval(ticker);
    const mergeSeconds = seconds(t);
    const mergeCpu = cpuSeconds(cpu);
    if (job?.state !== 'done') throw new Error(`merge failed: ${job?.error}`);
    log(`merge: ${mergeSeconds.toFixed(1)} s (process CPU ${mergeCpu.toFixed(1)} s) ${JSON.stringify(job.result)}`);

    const mainFile = readdirSync(dir).find((f) => /^main-\d+\.faiss$/.test(f))!;
    const fileBytes = statSync(path.join(dir, mainFile)).size;
    // What FAISS holds for the index as served (read back from its file), by part.
    const served = await FaissIndex.read(path.join(dir, mainFile));
    const memory = served.memoryUsage();
    const fixedBytes = memory.total - (memory.lists ?? 0);
    log(
      `main index: file ${(fileBytes / n).toFixed(1)} bytes/vector; in memory ${((memory.lists ?? 0) / n).toFixed(1)} bytes/vector (codes + ids) ` +
        `+ ${(fixedBytes / 2 ** 20).toFixed(1)} MiB fixed (coarse ${((memory.coarse ?? 0) / 2 ** 20).toFixed(1)}, codebooks ` +
        `${((memory.codebooks ?? 0) / 2 ** 20).toFixed(1)}, ` +
        `precomputed tables ${((memory.tables ?? 0) / 2 ** 20).toFixed(1)} MiB) = ${(memory.total / n).toFixed(1)} bytes/vector all in`,
    );
    const runs: SizeResult['runs'] = [];
    for (const nprobe of nprobes) {
      for (const rerankFactor of [0, ...rerankFactors]) {
        const rerank = rerankFactor > 0;
        t = performance.now();
        const found: number[][] = new Array<number[]>(queryCount);
        let next = 0;
        const client = async () => {
          for (let q = next++; q < queryCount; q = next++) {
            const [hits] = await index.search(queries.subarray(q * d, (q + 1) * d), k, { nprobe, rerank, ...(rerank ? { rerankFactor } : {}) });
            found[q] = hits.map((h) => h.id);
          }
        };
        await Promise.all(Array.from({ length: concurrency }, client));
        const qps = queryCount / seconds(t);
        const r = recall(found, truth);
        runs.push({ nprobe, rerank, ...(rerank ? { rerankFactor } : {}), qps, recall_at_10: r });
        log(
          `  nprobe ${String(nprobe).padStart(3)} rerank ${rerank ? `on (${k * rerankFactor} candidates)` : 'off'}: ${qps.toFixed(0)} q/s, recall@10 ` +
            `${r.toFixed(3)}`,
        );
      }
    }
    await index.close();
    return {
      vectors: n,
      index: indexString,
      buffer_add_vectors_per_s: addRate,
      merge: job.result ?? {},
      merge_seconds: mergeSeconds,
      merge_cpu_seconds: mergeCpu,
      index_file_bytes_per_vector: fileBytes / n,
      memory: { ...memory, per_vector: (memory.lists ?? 0) / n, fixed: fixedBytes, all_in_per_vector: memory.total / n },
      exact: { qps_single: exactSingle, qps_batch: exactBatch },
      runs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchEncode(): Promise<{ images: number; images_per_s: number; texts_per_s: number; source: string }> {
  const modelDir = mkdtempSync(path.join(tmpdir(), 'strata-bench-clip-'));
  try {
    writeTestClipModel(modelDir);
    const encoder = await ClipEncoder.load(modelDir);
    const stamps = '/usr/share/tuxpaint/stamps';
    const files: string[] = [];
    if (existsSync(stamps)) {
      for (const entry of readdirSync(stamps, { recursive: true }) as string[]) {
        if (entry.endsWith('.png') && files.length < 256) files.push(path.join(stamps, entry));
      }
    }
    let t = performance.now();
    await encoder.encodeImages(files);
    const imagesPerS = files.length / seconds(t);
    const texts = Array.from({ length: 512 }, (_, i) => `a photo of a red thing number ${i}`);
    t = performance.now();
    for (let i = 0; i < texts.length; i += 64) await encoder.encodeTexts(texts.slice(i, i + 64));
    const textsPerS = texts.length / seconds(t);
    await encoder.close();
    log(`encode (test CLIP model): ${imagesPerS.toFixed(1)} images/s over ${files.length} Tux Paint PNGs, ${textsPerS.toFixed(0)} texts/s`);
    return { images: files.length, images_per_s: imagesPerS, texts_per_s: textsPerS, source: stamps };
  } finally {
    rmSync(modelDir, { recursive: true, force: true });
  }
}

log(
  `image search bench: sizes ${sizes.join(', ')}, ${indexString}, ${queryCount} queries (${concurrency} at a time), nprobe ${nprobes.join('/')}, ` +
    `OMP_WAIT_POLICY=${process.env.OMP_WAIT_POLICY}, OPENBLAS_THREAD_TIMEOUT=${process.env.OPENBLAS_THREAD_TIMEOUT}, training ` +
    `${JSON.stringify(training)}, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}, rss ${mb().toFixed(0)} MiB`,
);
const results: SizeResult[] = [];
const encode = await benchEncode();
for (const n of sizes) results.push(await benchSize(n));
mkdirSync('test/artifacts', { recursive: true });
const out = { date: new Date().toISOString(), quick, index: indexString, training, load_average: loadavg(), queries: queryCount, results, encode };
writeFileSync('test/artifacts/bench-image-search.json', JSON.stringify(out, null, 2));
console.log('\n| vectors | nprobe | rerank candidates | q/s | recall@10 |\n|---|---|---|---|---|');
for (const r of results)
  for (const run of r.runs)
    console.log(
      `| ${r.vectors} | ${run.nprobe} | ${run.rerank ? k * (run.rerankFactor ?? 10) : 'off'} | ${run.qps.toFixed(0)} | ${run.recall_at_10.toFixed(3)} |`,
    );
log('done: test/artifacts/bench-image-search.json');
