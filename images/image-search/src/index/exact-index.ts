// An exact (brute-force) vector index in plain TypeScript with the FAISS binding's interface, for
// machines where the binding is not built: the same results as FAISS's `IDMap2,Flat` (squared L2 or
// inner product), fine for demo-sized collections. It trains nothing; approximate index strings
// (IVF, PQ, HNSW...) need FAISS.
import { closeSync, openSync, promises as fs, readSync } from 'node:fs';
import type { FaissIndex, FaissIndexConstructor, SearchResult } from './faiss.js';

/** The first bytes of a file written by ExactIndex (FAISS files start with a four-letter fourcc). */
const MAGIC = Buffer.from('STRATA-EXACT-1\n\0');
const HEADER = MAGIC.length + 16; // magic, d (u32), metric (u32), n (u64)

/** The descriptions ExactIndex answers to: a flat index, with or without an id map. */
const FLAT = /^(IDMap2?,)?Flat$/;

export function isExactIndexFile(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(MAGIC.length);
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(MAGIC);
  } finally {
    closeSync(fd);
  }
}

export class ExactIndex implements FaissIndex {
  private ids: bigint[] = [];
  /** Row-major vectors; capacity grows by doubling, the first ntotal rows are in use. */
  private buffer = new Float32Array(0);
  private readonly position = new Map<bigint, number>();

  constructor(
    readonly d: number,
    description = 'IDMap2,Flat',
    private readonly metric: 'l2' | 'ip' = 'l2',
  ) {
    if (!Number.isInteger(d) || d <= 0) throw new RangeError(`dimension must be a positive integer, got ${d}`);
    if (!FLAT.test(description)) {
      throw new Error(`the exact in-process index supports only Flat indexes, not ${JSON.stringify(description)} (that needs the FAISS binding)`);
    }
  }

  get ntotal(): number {
    return this.ids.length;
  }

  /** The rows in use. */
  private get rows(): Float32Array {
    return this.buffer.subarray(0, this.ids.length * this.d);
  }

  get isTrained(): boolean {
    return true;
  }

  async train(): Promise<void> {}

  async addWithIds(vectors: Float32Array, ids: BigInt64Array): Promise<void> {
    if (vectors.length !== ids.length * this.d) throw new RangeError(`expected ${ids.length} vectors of dimension ${this.d}`);
    const used = this.ids.length * this.d;
    if (used + vectors.length > this.buffer.length) {
      const grown = new Float32Array(Math.max(used + vectors.length, 2 * this.buffer.length));
      grown.set(this.rows);
      this.buffer = grown;
    }
    this.buffer.set(vectors, used);
    for (const id of ids) {
      this.position.set(id, this.ids.length);
      this.ids.push(id);
    }
  }

  /** Each query's k best rows: smallest squared L2, or largest inner product; missing slots +Inf/-Inf and -1. */
  async search(queries: Float32Array, k: number): Promise<SearchResult> {
    if (queries.length % this.d) throw new RangeError(`queries must be rows of dimension ${this.d}`);
    const n = queries.length / this.d;
    const distances = new Float32Array(n * k).fill(this.metric === 'ip' ? -Infinity : Infinity);
    const labels = new BigInt64Array(n * k).fill(-1n);
    const scores = new Float32Array(this.ids.length);
    const order = this.ids.map((_, i) => i);
    for (let q = 0; q < n; q++) {
      const query = queries.subarray(q * this.d, (q + 1) * this.d);
      for (let i = 0; i < this.ids.length; i++) scores[i] = this.score(query, i);
      const better = this.metric === 'ip' ? (a: number, b: number) => scores[b] - scores[a] : (a: number, b: number) => scores[a] - scores[b];
      const best = order.sort((a, b) => better(a, b) || Number(this.ids[a] - this.ids[b])).slice(0, k);
      best.forEach((i, j) => {
        distances[q * k + j] = scores[i];
        labels[q * k + j] = this.ids[i];
      });
    }
    return { distances, labels };
  }

  private score(query: Float32Array, row: number): number {
    const base = row * this.d;
    const rows = this.buffer;
    let s = 0;
    if (this.metric === 'ip') for (let j = 0; j < this.d; j++) s += query[j] * rows[base + j];
    else
      for (let j = 0; j < this.d; j++) {
        const diff = query[j] - rows[base + j];
        s += diff * diff;
      }
    return s;
  }

  async removeIds(ids: BigInt64Array): Promise<number> {
    const drop = new Set([...ids].filter((id) => this.position.has(id)));
    if (!drop.size) return 0;
    const keep = this.ids.map((_, i) => i).filter((i) => !drop.has(this.ids[i]));
    this.select(keep);
    return drop.size;
  }

  private select(keep: number[]): void {
    const rows = new Float32Array(keep.length * this.d);
    keep.forEach((i, j) => rows.set(this.buffer.subarray(i * this.d, (i + 1) * this.d), j * this.d));
    this.ids = keep.map((i) => this.ids[i]);
    this.buffer = rows;
    this.position.clear();
    this.ids.forEach((id, i) => this.position.set(id, i));
  }

  async write(file: string): Promise<void> {
    const header = Buffer.alloc(HEADER);
    MAGIC.copy(header);
    header.writeUInt32LE(this.d, MAGIC.length);
    header.writeUInt32LE(this.metric === 'ip' ? 0 : 1, MAGIC.length + 4); // FAISS's metric numbers
    header.writeBigUInt64LE(BigInt(this.ids.length), MAGIC.length + 8);
    const ids = BigInt64Array.from(this.ids);
    const rows = this.rows;
    await fs.writeFile(file, Buffer.concat([header, Buffer.from(ids.buffer), Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength)]));
  }

  static async read(file: string): Promise<ExactIndex> {
    const data = await fs.readFile(file);
    if (data.length < HEADER || !data.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error(`${file} is not an exact index file`);
    const d = data.readUInt32LE(MAGIC.length);
    const metric = data.readUInt32LE(MAGIC.length + 4) === 0 ? 'ip' : 'l2';
    const n = Number(data.readBigUInt64LE(MAGIC.length + 8));
    if (data.length !== HEADER + n * 8 + n * d * 4) throw new Error(`${file} is truncated (${data.length} bytes for ${n} vectors of dimension ${d})`);
    const index = new ExactIndex(d, 'IDMap2,Flat', metric);
    const body = data.buffer.slice(data.byteOffset + HEADER, data.byteOffset + data.length);
    await index.addWithIds(new Float32Array(body, n * 8, n * d), new BigInt64Array(body, 0, n));
    return index;
  }

  async clone(): Promise<ExactIndex> {
    const copy = new ExactIndex(this.d, 'IDMap2,Flat', this.metric);
    await copy.addWithIds(this.rows.slice(), BigInt64Array.from(this.ids));
    return copy;
  }

  reconstruct(id: number | bigint): Float32Array {
    const i = this.position.get(BigInt(id));
    if (i === undefined) throw new Error(`id ${id} not found`);
    return this.buffer.slice(i * this.d, (i + 1) * this.d);
  }

  memoryUsage(): { total: number } {
    return { total: this.buffer.byteLength + this.ids.length * 8 };
  }
}

/** ExactIndex as a FaissIndexConstructor (its `read` refuses FAISS's own files). */
export const ExactIndexConstructor: FaissIndexConstructor = ExactIndex;
