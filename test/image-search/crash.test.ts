import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ImageIndex } from '../../images/image-search/src/index/image-index.js';
import { clusteredVectors } from './support/clustered-vectors.js';
import { CRASH_DIM, crashIndexOptions } from './support/crash-index.js';

const worker = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'crash-worker.ts');
const d = CRASH_DIM;
const names = (from: number, n: number) => Array.from({ length: n }, (_, i) => `img/${from + i}.jpg`);

/** Run the worker; it must die by SIGKILL at the crash point. */
function crash(dir: string, op: string, point: string): void {
  const result = spawnSync(process.execPath, ['--import', 'tsx', worker, dir, op, point], { encoding: 'utf8', timeout: 60_000 });
  expect(result.signal, `${op} ${point}: ${result.stderr}`).to.equal('SIGKILL');
}

describe('image-search: a real crash (SIGKILL) during add, merge or rebuild loses nothing', function () {
  this.timeout(120_000);
  let dir: string;
  const data = clusteredVectors(2700, d, 30, 21);
  const options = () => crashIndexOptions(dir);

  /** Every live id finds itself first (exact re-ranking gives distance ~0); deleted ids stay hidden. */
  async function expectIntact(index: ImageIndex, live: number[], hidden: number[]) {
    for (const id of live) {
      const [hits] = await index.search(data.slice(id * d, (id + 1) * d), 3);
      expect(hits[0], `id ${id}`).to.deep.include({ id, path: `img/${id}.jpg` });
    }
    for (const id of hidden) {
      expect(index.isLive(id)).to.equal(false);
      const [hits] = await index.search(data.slice(id * d, (id + 1) * d), 5);
      expect(hits.map((h) => h.id)).to.not.include(id);
    }
    const strays = readdirSync(dir).filter((f) => f.includes('.tmp') || (/^main-\d+\.faiss$/.test(f) && f !== `main-${index.status().main.generation}.faiss`));
    expect(strays).to.deep.equal([]);
  }

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-image-crash-'));
    // A trained main index (generation 1), a buffer of 200 and two deleted ids.
    const index = await ImageIndex.open(options());
    await index.add(data.slice(0, 2500 * d), names(0, 2500));
    index.merge();
    expect((await index.waitForJob())?.state).to.equal('done');
    await index.add(data.slice(2500 * d, 2700 * d), names(2500, 200));
    await index.remove([5, 2600]);
    await index.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const sample = [0, 1, 6, 999, 2499, 2500, 2601, 2699];

  /** The index as it opens after a crash: its main part, counts and buffer as given, every sampled id intact. */
  async function expectRecovered(label: string, main: object, counts: object, bufferVectors: number) {
    const index = await ImageIndex.open(options());
    const status = index.status();
    expect(status.main, label).to.deep.include(main);
    expect(status, label).to.deep.include(counts);
    expect(status.buffer.vectors, label).to.equal(bufferVectors);
    await expectIntact(index, sample, [5, 2600]);
    await index.close();
  }

  it('before the new main index file is renamed into place, and before the manifest commits it', async () => {
    for (const [op, point] of [
      ['rebuild', 'main-rename'],
      ['merge', 'manifest-rename'],
      ['rebuild', 'manifest-rename'],
    ]) {
      crash(dir, op, point);
      await expectRecovered(`${op} ${point}`, { kind: 'ivf', generation: 1, vectors: 2500 }, { nextId: 2700, deleted: 2, totalVectors: 2698 }, 199);
    }
  });

  it('after the manifest commits, before the previous main index file is removed', async () => {
    crash(dir, 'rebuild', 'old-main-rm');
    await expectRecovered('rebuild old-main-rm', { kind: 'ivf', generation: 2, vectors: 2698 }, { nextId: 2700, deleted: 0, purged: 2, totalVectors: 2698 }, 0);
  });

  it('during an add: vectors written, manifest not committed — the add never happened', async () => {
    crash(dir, 'add', 'manifest-rename');
    const index = await ImageIndex.open(options());
    expect(index.status()).to.deep.include({ nextId: 2700, totalVectors: 2698 });
    expect(index.idOf('crash/0.jpg')).to.equal(undefined);
    const added = await index.add(data.slice(0, d), ['again/0.jpg']);
    expect(added.added[0].id).to.equal(2700);
    await index.close();
    const reopened = await ImageIndex.open(options());
    expect(reopened.pathOf(2700)).to.equal('again/0.jpg');
    await expectIntact(reopened, sample, [5, 2600]);
    await reopened.close();
  });
});
