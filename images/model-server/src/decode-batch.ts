import { HEAD_DIM as HEAD_DIM_IMPORT, MODEL_DIMS } from './model-spec.js';
import { range, type DecoderStepInput, type DecoderStepOutput, type EncodedPrompt } from './onnx-transformer.js';

const { heads: H, decoderLayers: LAYERS, dModel: D } = MODEL_DIMS;
// A module-local copy: compiled to CommonJS (the worker thread), each use of an import is a getter call.
const HEAD_DIM = HEAD_DIM_IMPORT;
/** The cache's capacity (columns) grows and shrinks in steps of this. */
const COLUMN_STEP = 16;
/** The memory width grows in steps of this, so a slightly longer prompt rarely forces a re-layout. */
const SOURCE_STEP = 8;
/** Buffers hold room for rows in steps of this, so a joining sequence rarely forces a re-layout. */
const ROW_STEP = 8;

/**
 * The decoder-side state of every sequence being generated together, laid out as the decoder graph
 * wants it: one row per sequence, [rows, H, len, dh] per layer (continuous batching).
 *
 * The key/value cache has a capacity of columns: each step the graph reads it in place (the
 * tensors are views of these buffers, nothing is copied per step) and returns only the new token's
 * keys and values, which advance() writes into each row's own next column: a row's token i lives in
 * column i, whenever its sequence joined, and the columns it has not written are masked. So the
 * capacity only has to hold the longest sequence in the batch (not the span since the oldest row
 * joined, as with columns shared by all rows, which under staggered joins was twice as wide and had
 * to be re-laid out every few steps); it grows by COLUMN_STEP when the longest row fills it, and
 * compact() shrinks it once the long rows have left.
 *
 * Every row holds a live sequence: a joining prompt takes a new row at the end (the buffers keep
 * room for more rows), and a finished sequence's row is refilled at once by the last row (one row
 * copied), so no decoder run computes a row nobody reads.
 */
export class DecodeBatch {
  rows = 0;
  /** Rows the buffers have room for (kept while the batch is busy, so rows come and go without a re-layout). */
  private rowCap = 0;
  private sourceLen = 0;
  private memoryMask: Float32Array = new Float32Array(0);
  private memoryKeys: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  private memoryValues: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  /** Cache columns each row has written: the next step's keys and values of row r go to column filled[r]. */
  private filled = new Int32Array(0);
  /** The cache's capacity, in columns (the past_len of the decoder's tensors). */
  private pastLen = COLUMN_STEP;
  private pastMask: Float32Array = new Float32Array(0);
  private pastKeys: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  private pastValues: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  private tokens = new BigInt64Array(0);
  private positions = new BigInt64Array(0);

  /** The cache's capacity in columns (what the decoder's past tensors hold). */
  get cacheColumns(): number {
    return this.pastLen;
  }

  /** Put each prompt in a new row at the end; returns the rows, in order. */
  add(prompts: readonly EncodedPrompt[]): number[] {
    if (prompts.length === 0) return [];
    const longest = Math.max(...prompts.map((p) => p.length));
    if (longest > this.sourceLen) this.relayout(Math.ceil(longest / SOURCE_STEP) * SOURCE_STEP, this.pastLen);
    const first = this.rows;
    this.grow(first + prompts.length);
    prompts.forEach((p, i) => this.place(first + i, p));
    return prompts.map((_, i) => first + i);
  }

  /**
   * The sequences in these rows are done: each row is refilled at once by the batch's last row (one
   * row copied; before, released rows rode along in every decoder run until an arrival reused them,
   * ~4 of a batch of 32 under a closed-loop load). Returns the old row index of each remaining row,
   * in its new order (the caller moves its per-row state the same way).
   */
  release(rows: readonly number[]): number[] {
    const order = range(this.rows);
    // From the highest row down: every released row above the current one is gone already, so the
    // last row is either this one or a live one.
    for (const r of [...rows].sort((a, b) => b - a)) {
      const last = this.rows - 1;
      if (r !== last) {
        this.moveRow(last, r);
        order[r] = order[last]!;
      }
      order.pop();
      this.rows--;
    }
    return order;
  }

  /**
   * Shrink the cache's capacity to what the longest row needs, once that frees two COLUMN_STEPs (one,
   * with `force`): a margin, so that traffic of mixed lengths does not grow and shrink it back and forth.
   * With `force` and no rows, let the buffers go. Rows keep their order. True when re-laid out.
   */
  compact(force = false): boolean {
    if (this.rows === 0) {
      if (force && this.rowCap > 0) this.reset();
      return false;
    }
    let longest = 0;
    for (let r = 0; r < this.rows; r++) longest = Math.max(longest, this.filled[r]!);
    const pastLen = Math.max(COLUMN_STEP, Math.ceil((longest + 1) / COLUMN_STEP) * COLUMN_STEP);
    if (this.pastLen - pastLen < (force ? 1 : 2) * COLUMN_STEP) return false;
    this.relayout(this.sourceLen, pastLen);
    return true;
  }

  /** The next step's inputs: each row's last token and its position. */
  stepInput(tokens: ArrayLike<number>, positions: ArrayLike<number>): DecoderStepInput {
    for (let r = 0; r < this.rows; r++) {
      this.tokens[r] = BigInt(tokens[r]!);
      this.positions[r] = BigInt(positions[r]!);
    }
    return {
      batch: this.rows,
      tokens: this.tokens,
      positions: this.positions,
      sourceLen: this.sourceLen,
      memoryMask: this.memoryMask,
      memoryKeys: this.memoryKeys,
      memoryValues: this.memoryValues,
      pastLen: this.pastLen,
      pastMask: this.pastMask,
      pastKeys: this.pastKeys,
      pastValues: this.pastValues,
    };
  }

  /** Write the step's keys/values into each row's next cache column; the row attends to it from now on. */
  advance(out: DecoderStepOutput): void {
    const kv = out.newKeyValues;
    const rowStride = LAYERS * 2 * D;
    let longest = 0;
    for (let r = 0; r < this.rows; r++) {
      const col = this.filled[r]!;
      for (let l = 0; l < LAYERS; l++) {
        for (let kind = 0; kind < 2; kind++) {
          const dst = kind === 0 ? this.pastKeys[l]! : this.pastValues[l]!;
          const src = r * rowStride + (2 * l + kind) * D;
          for (let h = 0; h < H; h++) {
            const to = ((r * H + h) * this.pastLen + col) * HEAD_DIM;
            const from = src + h * HEAD_DIM;
            for (let i = 0; i < HEAD_DIM; i++) dst[to + i] = kv[from + i]!;
          }
        }
      }
      this.pastMask[r * this.pastLen + col] = 1;
      this.filled[r] = col + 1;
      longest = Math.max(longest, col + 1);
    }
    // Room for the next step.
    if (longest === this.pastLen) this.relayout(this.sourceLen, this.pastLen + COLUMN_STEP);
  }

  /** Write a prompt's memory into row r and hide the row's old cache columns. */
  private place(r: number, p: EncodedPrompt): void {
    for (let l = 0; l < LAYERS; l++) {
      writeRow(this.memoryKeys[l]!, r, this.sourceLen, p.memoryKeys[l]!, p.length);
      writeRow(this.memoryValues[l]!, r, this.sourceLen, p.memoryValues[l]!, p.length);
    }
    this.memoryMask.fill(0, r * this.sourceLen, (r + 1) * this.sourceLen).fill(1, r * this.sourceLen, r * this.sourceLen + p.length);
    this.pastMask.fill(0, r * this.pastLen, (r + 1) * this.pastLen);
    this.filled[r] = 0;
  }

  /** Copy row `from` over row `to` (memory, cache and masks) in place. */
  private moveRow(from: number, to: number): void {
    const memoryRow = H * this.sourceLen * HEAD_DIM;
    const pastRow = H * this.pastLen * HEAD_DIM;
    const move = (a: Float32Array, size: number) => a.copyWithin(to * size, from * size, (from + 1) * size);
    for (let l = 0; l < LAYERS; l++) {
      move(this.memoryKeys[l]!, memoryRow);
      move(this.memoryValues[l]!, memoryRow);
      move(this.pastKeys[l]!, pastRow);
      move(this.pastValues[l]!, pastRow);
    }
    move(this.memoryMask, this.sourceLen);
    move(this.pastMask, this.pastLen);
    this.filled[to] = this.filled[from]!;
  }

  /** Add rows at the end (filled by place()). */
  private grow(rows: number): void {
    if (rows > this.rowCap) {
      const rowCap = Math.ceil(rows / ROW_STEP) * ROW_STEP;
      const extend = (a: Float32Array, rowSize: number): Float32Array => {
        const out = new Float32Array(rowCap * rowSize);
        out.set(a.subarray(0, this.rows * rowSize));
        return out;
      };
      const memoryRow = H * this.sourceLen * HEAD_DIM;
      const pastRow = H * this.pastLen * HEAD_DIM;
      this.memoryKeys = this.memoryKeys.map((a) => extend(a, memoryRow));
      this.memoryValues = this.memoryValues.map((a) => extend(a, memoryRow));
      this.memoryMask = extend(this.memoryMask, this.sourceLen);
      this.pastKeys = this.pastKeys.map((a) => extend(a, pastRow));
      this.pastValues = this.pastValues.map((a) => extend(a, pastRow));
      this.pastMask = extend(this.pastMask, this.pastLen);
      this.setRowCap(rowCap);
    }
    this.rows = rows;
  }

  private setRowCap(rowCap: number): void {
    const filled = new Int32Array(rowCap);
    filled.set(this.filled.subarray(0, Math.min(this.rows, rowCap)));
    this.filled = filled;
    this.rowCap = rowCap;
    this.tokens = new BigInt64Array(rowCap);
    this.positions = new BigInt64Array(rowCap);
  }

  /**
   * Rebuild with memory width `sourceLen` and cache capacity `pastLen` (at least every row's written
   * columns); the room for rows is kept. Buffers whose shape does not change are reused.
   */
  private relayout(sourceLen: number, pastLen: number): void {
    const rowCap = Math.max(ROW_STEP, this.rowCap);
    const select = (a: Float32Array, srcLen: number, dstLen: number) => {
      const out = new Float32Array(rowCap * H * dstLen * HEAD_DIM);
      const n = Math.min(srcLen, dstLen);
      for (let r = 0; r < this.rows; r++) copyRow(out, a, r, srcLen, dstLen, n);
      return out;
    };
    const selectMask = (a: Float32Array, srcLen: number, dstLen: number) => {
      const out = new Float32Array(rowCap * dstLen);
      const n = Math.min(srcLen, dstLen);
      for (let r = 0; r < this.rows; r++) out.set(a.subarray(r * srcLen, r * srcLen + n), r * dstLen);
      return out;
    };
    if (sourceLen !== this.sourceLen || rowCap !== this.rowCap) {
      this.memoryKeys = this.memoryKeys.map((a) => select(a, this.sourceLen, sourceLen));
      this.memoryValues = this.memoryValues.map((a) => select(a, this.sourceLen, sourceLen));
      this.memoryMask = selectMask(this.memoryMask, this.sourceLen, sourceLen);
    }
    if (pastLen !== this.pastLen || rowCap !== this.rowCap) {
      this.pastKeys = this.pastKeys.map((a) => select(a, this.pastLen, pastLen));
      this.pastValues = this.pastValues.map((a) => select(a, this.pastLen, pastLen));
      this.pastMask = selectMask(this.pastMask, this.pastLen, pastLen);
    }
    this.sourceLen = sourceLen;
    this.pastLen = pastLen;
    if (rowCap !== this.rowCap) this.setRowCap(rowCap);
  }

  private reset(): void {
    this.rows = 0;
    this.rowCap = 0;
    this.sourceLen = 0;
    this.memoryMask = new Float32Array(0);
    this.memoryKeys = range(LAYERS).map(() => new Float32Array(0));
    this.memoryValues = range(LAYERS).map(() => new Float32Array(0));
    this.filled = new Int32Array(0);
    this.pastLen = COLUMN_STEP;
    this.pastMask = new Float32Array(0);
    this.pastKeys = range(LAYERS).map(() => new Float32Array(0));
    this.pastValues = range(LAYERS).map(() => new Float32Array(0));
    this.tokens = new BigInt64Array(0);
    this.positions = new BigInt64Array(0);
  }
}

/** Copy the first `cols` positions of row r of a [*, H, srcLen, dh] tensor to row r of a [*, H, dstLen, dh] one. */
function copyRow(dst: Float32Array, src: Float32Array, r: number, srcLen: number, dstLen: number, cols: number): void {
  for (let h = 0; h < H; h++) {
    const from = (r * H + h) * srcLen * HEAD_DIM;
    dst.set(src.subarray(from, from + cols * HEAD_DIM), (r * H + h) * dstLen * HEAD_DIM);
  }
}

/** Overwrite row r of a [*, H, width, dh] tensor with a prompt's [H, length, dh] (zeros after `length`). */
function writeRow(dst: Float32Array, r: number, width: number, src: Float32Array, length: number): void {
  for (let h = 0; h < H; h++) {
    const at = (r * H + h) * width * HEAD_DIM;
    dst.fill(0, at, at + width * HEAD_DIM);
    dst.set(src.subarray(h * length * HEAD_DIM, (h + 1) * length * HEAD_DIM), at);
  }
}
