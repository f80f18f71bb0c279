// Image search follows its bucket: how long from an S3 request returning until the index shows it.
//
//   npx tsx hack/bench/image-search-bucket.ts              # 20 rounds
//   options: --rounds=50
//            --library   the bucket first holds what a real photo library has: adversarial keys (`x.jpg`
//                        and `x.jpg/inner.jpg`, unicode, spaces, a 1 000-byte key), formats not read
//                        (.bmp, .heic, no extension) and two 19.5 MB TIFF scans; the rounds then follow
//                        it, and a results page (HTML, script, style, JSON, grid thumbnails) is weighed
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
import { largeTiff } from '../../test/image-search/support/large-images.js';

const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? 20);
const library = process.argv.includes('--library');
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

// The bucket is the root's (private): searches carry the root's gateway login, an image-search admin under the platform.
const login = await fetch(`${platform.urls.gateway}/login`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ username: platform.rootUser, password: platform.rootPassword }),
});
const auth = { authorization: `Bearer ${((await login.json()) as { data: { token: string } }).data.token}` };

interface Hit {
  id: number;
  path: string;
}

/** The top hits of a search by image. */
async function searchByImage(image: Buffer): Promise<Hit[]> {
  const form = new FormData();
  form.append('topk', '3');
  form.append('query_img', new Blob([new Uint8Array(image)], { type: 'image/png' }), 'query.png');
  const response = await fetch(`${base}/search`, { method: 'POST', headers: auth, body: form });
  if (!response.ok) throw new Error(`search answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { results: Hit[] }).results;
}

async function idIsGone(id: number): Promise<boolean> {
  const response = await fetch(`${base}/api/tools/call`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
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

/** The adversarial library (--library): keys, formats not read, and 19.5 MB TIFFs beside the rounds' keys. */
async function putLibrary(): Promise<string[]> {
  const put = async (key: string, body: Buffer | string, type = 'application/octet-stream') =>
    s3.send(new PutObjectCommand({ Bucket: 'photos', Key: `bench/${key}`, Body: body, ContentType: type }));
  const keys = ['lib/x.jpg', 'lib/x.jpg/inner.jpg', 'lib/ünï cödé 写真.png', 'lib/with  two spaces .png', `lib/${'long-'.repeat(195)}end.png`];
  let seed = 5000;
  for (const key of keys) await put(key, await colourImage([200, 40, 40], seed++, 320, 240), 'image/png');
  await put('lib/photo.bmp', 'not read: libvips has no BMP loader');
  await put('lib/phone.heic', 'not read where sharp has no HEVC decoder');
  await put('lib/no-extension', 'no extension');
  await put('lib/scan-red.tif', await largeTiff([210, 40, 40], 1), 'image/tiff');
  await put('lib/scan-blue.tif', await largeTiff([40, 60, 210], 2), 'image/tiff');
  return [...keys, 'lib/scan-red.tif', 'lib/scan-blue.tif'];
}

/** What a results page of a text search costs: the page, its script and style, the JSON and the grid's 160 px thumbnails. */
async function resultsPageBytes(query: string): Promise<{ bytes: number; results: number }> {
  let bytes = 0;
  for (const asset of ['/', '/static/app.js', '/static/style.css']) bytes += (await (await fetch(base + asset)).arrayBuffer()).byteLength;
  const response = await fetch(`${base}/search`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ query, topk: 20 }),
  });
  const body = await response.arrayBuffer();
  bytes += body.byteLength;
  const results = (JSON.parse(Buffer.from(body).toString()) as { results: Array<{ thumbnailUrl: string }> }).results;
  for (const r of results) bytes += (await (await fetch(base + r.thumbnailUrl, { headers: { accept: 'image/webp,*/*' } })).arrayBuffer()).byteLength;
  return { bytes, results: results.length };
}

const timings = { upload: [] as number[], overwrite: [] as number[], delete: [] as number[] };
let page: { bytes: number; results: number } | undefined;
try {
  await s3.send(new CreateBucketCommand({ Bucket: 'photos' }));
  if (library) {
    const keys = await putLibrary();
    // The library is followed before the rounds start: every image of it searchable.
    const started = performance.now();
    const tiff = mirrorPathOf('photos', 'bench/lib/scan-blue.tif');
    await msUntil(async () => (await searchByImage(await colourImage([40, 60, 210], 2, 64, 64))).some((h) => h.path === tiff));
    console.log(`library of ${keys.length} images (+3 not read) followed in ${Math.round(performance.now() - started)} ms`);
  }
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
  if (library) page = await resultsPageBytes('red');
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
if (page)
  console.log(`  results page (20 results, 160 px thumbnails, page + script + style + JSON): ${page.bytes} bytes, ${page.results} results (target < 2 MB)`);
mkdirSync('test/artifacts', { recursive: true });
writeFileSync(
  'test/artifacts/bench-image-search-bucket.json',
  JSON.stringify({ rounds, library, date: new Date().toISOString(), ...figures, ...(page ? { resultsPageBytes: page.bytes } : {}) }, null, 2),
);
