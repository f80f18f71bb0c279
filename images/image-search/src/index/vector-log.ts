// Append-only store of every vector and image path ever added, addressed by id (ids are dense: 0..nextId-1).
// The raw float vectors serve exact re-ranking, rebuilds and the brute-force buffer after a restart;
// bytes beyond nextId (an add that crashed before its manifest) are cut off at open.
import { openSync, readSync, closeSync, fsyncSync, writeSync, ftruncateSync, fstatSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';

export class VectorLog {
  private readonly vectorFd: number;
  private readonly pathFd: number;
  /** Byte length of the committed path lines (where the next line is written). */
  private pathEnd: number;
  private readonly rowBytes: number;
  private count: number;
  readonly paths: string[] = [];

  constructor(
    dir: string,
    readonly dim: number,
    committedCount: number,
  ) {
    this.rowBytes = dim * 4;
    const vectorFile = path.join(dir, 'vectors.f32');
    const pathFile = path.join(dir, 'paths.jsonl');
    this.vectorFd = openSync(vectorFile, existsSync(vectorFile) ? 'r+' : 'w+');
    const size = fstatSync(this.vectorFd).size;
    if (size < committedCount * this.rowBytes) {
      throw new Error(`vector log ${vectorFile} holds ${Math.floor(size / this.rowBytes)} rows, manifest says ${committedCount}`);
    }
    ftruncateSync(this.vectorFd, committedCount * this.rowBytes);
    // Paths: one JSON string per line, line i is id i. Uncommitted or torn trailing lines are cut off
    // by truncating in place (never by rewriting the file: a crash during a rewrite would lose the
    // committed lines too).
    const text = existsSync(pathFile) ? readFileSync(pathFile) : Buffer.alloc(0);
    let end = 0;
    for (let i = 0; i < committedCount; i++) {
      const newline = text.indexOf(0x0a, end);
      if (newline < 0) throw new Error(`path log ${pathFile} is shorter than ${committedCount} entries`);
      this.paths.push(JSON.parse(text.subarray(end, newline).toString('utf8')) as string);
      end = newline + 1;
    }
    this.pathFd = openSync(pathFile, existsSync(pathFile) ? 'r+' : 'w+');
    if (text.length > end) {
      ftruncateSync(this.pathFd, end);
      fsyncSync(this.pathFd);
    }
    this.pathEnd = end;
    this.count = committedCount;
  }

  get size(): number {
    return this.count;
  }

  /** Append rows (ids count, count+1, ...) durably; returns the first id. */
  append(vectors: Float32Array, paths: string[]): number {
    const first = this.count;
    const bytes = Buffer.from(vectors.buffer, vectors.byteOffset, vectors.byteLength);
    writeSync(this.vectorFd, bytes, 0, bytes.length, first * this.rowBytes);
    const lines = Buffer.from(paths.map((p) => JSON.stringify(p) + '\n').join(''), 'utf8');
    writeSync(this.pathFd, lines, 0, lines.length, this.pathEnd);
    fsyncSync(this.vectorFd);
    fsyncSync(this.pathFd);
    this.count += paths.length;
    this.pathEnd += lines.length;
    this.paths.push(...paths);
    return first;
  }

  /** Rows for the given ids, concatenated. */
  read(ids: ArrayLike<number>): Float32Array {
    const out = new Float32Array(ids.length * this.dim);
    const view = Buffer.from(out.buffer);
    for (let i = 0; i < ids.length; i++) {
      readSync(this.vectorFd, view, i * this.rowBytes, this.rowBytes, ids[i] * this.rowBytes);
    }
    return out;
  }

  /** A contiguous id range [from, to), in one read. */
  readRange(from: number, to: number): Float32Array {
    const out = new Float32Array((to - from) * this.dim);
    if (to > from) readSync(this.vectorFd, Buffer.from(out.buffer), 0, out.byteLength, from * this.rowBytes);
    return out;
  }

  close(): void {
    closeSync(this.vectorFd);
    closeSync(this.pathFd);
  }
}
