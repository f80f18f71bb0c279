// Image search follows its bucket: how long from an S3 request returning until the index shows it.
//
//   npx tsx hack/bench/image-search-bucket.ts              # 20 rounds
//   options: --rounds=50
//
// The standalone platform's object store and image search in this process (as `npm start` runs them,
// events through the in-process broker, no polling), the test CLIP model, and per round on one key:
//   upload    PutObject of a new image → a search by that image finds the key's mirrored path
//   overwrite PutObject of other content → the search by the new image finds the path under a new id
//             and the old id is gone (search_by_image_id answers 404): the new vector only
//   delete    DeleteObject → a search by the last image no longer finds the path
// Each is timed from the request's return; the figures (p50, p95, max in ms) go to stdout and
// test/artifacts/bench-image-search-bucket.json. Target: p95 under 1 s for each.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mirrorPathOf } from '../../images/image-search/src/bucket-source.js';
import { AI_SERVICES, OBJECT_STORE_SERVICES, startPlatform } from '../../images/standalone/src/platform.js';
import { writeTestClipModel } from '../clip/test-clip-model.js';
import { colourImage } from '../../test/image-search/support/fixtures.js';

const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? 20);
const work = mkdtempSync(path.join(tmpdir(), 'strata-bench-bucket-'));
const modelDir = path.join(work, 'model');
mkdirSync(modelDir);
writeTestClipModel(modelDir);
const platform = await startPlatform(
  {
    dataDir: path.join(work, 'data'),
    host: '127.0.0.1',
    ports: { gateway: 0, dataPlane: 0, controlPlane: 0, imageSearch: 0 },
    rootPassword: 'bench-password',
    purgeSchedule: false,
    logLevel: 'warn',
    env: { IMAGE_SEARCH_MODEL_DIR: modelDir, IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/bench/', IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '0' },
  },
  [...OBJECT_STORE_SERVICES, ...AI_SERVICES.filter((s) => s.name === 'image-search')],
);
const base = platform.urls['image-search'];
const s3 = new S3Client({
  endpoint: platform.urls.gateway,
  region: 'us-east-1',
  forcePathStyle: true,
  credentials: { accessKeyId: platform.rootUser, secretAccessKey: platform.rootPassword },
});

interface Hit {
  id: number;
  path: string;
}

/** The top hits of a search by image. */
async function searchByImage(image: Buffer): Promise<Hit[]> {
  const form = new FormData();
  form.append('topk', '3');
  form.append('query_img', new Blob([new Uint8Array(image)], { type: 'image/png' }), 'query.png');
  const response = await fetch(`${base}/search`, { method: 'POST', body: form });
  if (!response.ok) throw new Error(`search answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { results: Hit[] }).results;
}

async function idIsGone(id: number): Promise<boolean> {
  const response = await fetch(`${base}/api/tools/call`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'search_by_image_id', arguments: { image_id: id, topk: 1 } }),
  });
  await response.arrayBuffer();
  return response.status === 404;
}

/** Milliseconds from now until `probe` holds (polled every 10 ms; gives up after 30 s). */
async function msUntil(probe: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await probe())) {
    if (performance.now() - started > 30_000) throw new Error('not reached within 30 s');
    await new Promise((r) => setTimeout(r, 10));
  }
  return performance.now() - started;
}

const timings = { upload: [] as number[], overwrite: [] as number[], delete: [] as number[] };
try {
  await s3.send(new CreateBucketCommand({ Bucket: 'photos' }));
  for (let round = 0; round < rounds; round++) {
    const key = `bench/round-${round}.png`;
    const mirrored = mirrorPathOf('photos', key);
    const first = await colourImage([(round * 37) % 256, (round * 91) % 256, (round * 53) % 256], round + 1, 64, 64);
    const second = await colourImage([255 - ((round * 37) % 256), (round * 17) % 256, 255 - ((round * 53) % 256)], round + 1000, 64, 64);
    await s3.send(new PutObjectCommand({ Bucket: 'photos', Key: key, Body: first, ContentType: 'image/png' }));
    let oldId = -1;
    timings.upload.push(
      await msUntil(async () => {
        const hit = (await searchByImage(first)).find((h) => h.path === mirrored);
        if (hit) oldId = hit.id;
        return hit !== undefined;
      }),
    );
    await s3.send(new PutObjectCommand({ Bucket: 'photos', Key: key, Body: second, ContentType: 'image/png' }));
    timings.overwrite.push(
      await msUntil(async () => (await searchByImage(second)).some((h) => h.path === mirrored && h.id !== oldId) && (await idIsGone(oldId))),
    );
    await s3.send(new DeleteObjectCommand({ Bucket: 'photos', Key: key }));
    timings.delete.push(await msUntil(async () => !(await searchByImage(second)).some((h) => h.path === mirrored)));
  }
} finally {
  s3.destroy();
  await platform.stop();
  rmSync(work, { recursive: true, force: true });
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const figures = Object.fromEntries(
  Object.entries(timings).map(([name, values]) => [
    name,
    { p50_ms: Math.round(percentile(values, 50)), p95_ms: Math.round(percentile(values, 95)), max_ms: Math.round(Math.max(...values)) },
  ]),
);
console.log(`image search follows its bucket: ${rounds} rounds (target p95 < 1000 ms each)`);
for (const [name, f] of Object.entries(figures))
  console.log(`  ${name.padEnd(9)} p50 ${f.p50_ms} ms  p95 ${f.p95_ms} ms  max ${f.max_ms} ms${f.p95_ms < 1000 ? '' : '  (over target)'}`);
mkdirSync('test/artifacts', { recursive: true });
writeFileSync('test/artifacts/bench-image-search-bucket.json', JSON.stringify({ rounds, date: new Date().toISOString(), ...figures }, null, 2));
