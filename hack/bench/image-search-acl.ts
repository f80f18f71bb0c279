// What a sync round of image search's bucket source costs in GetObjectAcl requests, before and after
// reading only the ACLs that may have changed (images/image-search/src/acl-refresh.ts).
//
//   npx tsx hack/bench/image-search-acl.ts                 # 200 objects, 5 rounds per contender
//   options: --objects=1000 --rounds=10 --public=10        (percent of the objects public-read)
//
// The standalone platform's object store (the real gateway, its ACLs) in this process; a bucket of N
// images of the root user, `--public` percent of them public-read; a BucketSource over it with a
// stand-in index (no encoder: only the requests are counted). Contenders, in the same run, over the same
// bucket, each with a fresh mirror: `every round` (IMAGE_SEARCH_ACL_REFRESH_S=0: what every round did
// before) and `changed only` (the default 300 s, no full pass due during the run). Per contender: the
// first round (a full pass in both) and the later rounds over the unchanged bucket: GetObjectAcl
// requests per round and the round's wall time (median, ms).
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { BucketSource } from '../../images/image-search/src/bucket-source.js';
import { ImageFiles } from '../../images/image-search/src/image-files.js';
import type { SearchService } from '../../images/image-search/src/search-service.js';
import { OBJECT_STORE_SERVICES, startPlatform } from '../../images/standalone/src/platform.js';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const objects = arg('objects', 200);
const rounds = arg('rounds', 5);
const publicPercent = arg('public', 10);
const work = mkdtempSync(path.join(tmpdir(), 'strata-bench-acl-'));
const platform = await startPlatform(
  {
    dataDir: path.join(work, 'data'),
    host: '127.0.0.1',
    ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
    rootPassword: 'bench-password',
    purgeSchedule: false,
    logLevel: 'warn',
  },
  OBJECT_STORE_SERVICES,
);
const credentials = { accessKeyId: platform.rootUser, secretAccessKey: 'bench-password' };
const s3 = new S3Client({ endpoint: platform.urls.gateway, region: 'us-east-1', forcePathStyle: true, credentials });
await s3.send(new CreateBucketCommand({ Bucket: 'gallery', ObjectOwnership: 'ObjectWriter' }));
const publicEvery = publicPercent > 0 ? Math.round(100 / publicPercent) : Infinity;
for (let i = 0; i < objects; i++)
  await s3.send(
    new PutObjectCommand({
      Bucket: 'gallery',
      Key: `photos/p${i}.png`,
      Body: `image ${i}`,
      ACL: publicPercent > 0 && i % publicEvery === 0 ? 'public-read' : undefined,
    }),
  );

/** Indexes every path it is handed (no encoder). */
function standInIndex(): SearchService {
  const ids = new Map<string, number>();
  return {
    index: { idOf: (p: string) => ids.get(p) },
    indexPaths: async (paths: readonly string[]) => {
      for (const p of paths) ids.set(p, ids.size + 1);
      return { added: paths.length, replaced: 0, skipped: [] };
    },
    removePaths: async () => [],
  } as unknown as SearchService;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows: string[] = [];
for (const [name, refresh] of [
  ['every round', 0],
  ['changed only', 300],
] as const) {
  const dir = mkdtempSync(path.join(work, 'mirror-'));
  const source = new BucketSource({
    location: { endpoint: platform.urls.gateway, url: 's3://gallery/photos/', region: 'us-east-1', ...credentials },
    files: new ImageFiles(dir),
    service: standInIndex(),
    logger: pino({ level: 'silent' }),
    aclRefreshSeconds: refresh,
  });
  const first = await source.sync();
  const reads: number[] = [];
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    reads.push((await source.sync()).aclReads);
    ms.push(performance.now() - started);
  }
  rows.push(`| ${name} | ${first.aclReads} | ${median(reads)} (${Math.min(...reads)}–${Math.max(...reads)}) | ${median(ms).toFixed(0)} |`);
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  `${objects} objects, ${publicPercent} % public-read, ${rounds} later rounds each; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log('| contender | GetObjectAcl, first round | GetObjectAcl per later round (median, range) | later round, median ms |');
console.log('|---|---|---|---|');
for (const row of rows) console.log(row);
s3.destroy();
await platform.stop();
rmSync(work, { recursive: true, force: true });
