/**
 * Large GETs of files not in the page cache: through `npm start` (object store only), each 256 MiB PUT has a
 * body of its own (no deduplication onto a cached blob), so the GET right after it reads what the PUT wrote
 * with O_DIRECT (ADR 0004) from the device; a second GET of the same object reads the page cache. Prints both
 * rates per round (curl, SigV4 presigned URLs). Not a test.
 *
 *   npx tsx hack/bench/cold-gets.ts          # ROUNDS=4
 */
import { startLargeBench, writeRandomFile } from './standalone-bench.js';
import { curlTransfer } from './transfer.js';

const ROUNDS = Number(process.env.ROUNDS ?? 4);
const { sign, file, size, close } = await startLargeBench('strata-cold', ['plain'], 256);
try {
  const cold: number[] = [];
  const cached: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    await writeRandomFile(file, 256);
    await curlTransfer('PUT', sign('PUT', `/plain/k${i}`), size, file);
    cold.push(await curlTransfer('GET', sign('GET', `/plain/k${i}`), size));
    cached.push(await curlTransfer('GET', sign('GET', `/plain/k${i}`), size));
  }
  const list = (v: number[]) => v.map((r) => r.toFixed(0)).join(' ');
  console.log(`GET 256 MiB, MiB/s: cold ${list(cold)}; cached ${list(cached)}`);
} finally {
  await close();
}
