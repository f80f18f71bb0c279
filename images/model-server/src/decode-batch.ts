import { HEAD_DIM, MODEL_DIMS } from './model-spec.js';
import { range, type DecoderStepInput, type DecoderStepOutput, type EncodedPrompt } from './onnx-transformer.js';

const { heads: H, decoderLayers: LAYERS } = MODEL_DIMS;
/** Trim the cache once this many leading columns are unused: each trim copies the whole cache. */
const TRIM_COLUMNS = 16;
/** The memory width grows in steps of this, so a slightly longer prompt rarely forces a re-layout. */
const SOURCE_STEP = 8;

/**
 * The decoder-side state of every sequence being generated together, laid out as the decoder graph
 * wants it: one row per sequence, [rows, H, len, dh] per layer (continuous batching).
 *
 * Rows are slots: a finished sequence's row is released and the next prompt reuses it in place (its
 * old cache columns masked out), so sequences join and leave without copying the whole batch. The
 * batch is compacted (released rows dropped, unused leading cache columns trimmed) only when that
 * saves more than the copy costs.
 */
export class DecodeBatch {
  rows = 0;
  private live: boolean[] = [];
  private sourceLen = 0;
  private memoryMask: Float32Array = new Float32Array(0);
  private memoryKeys: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  private memoryValues: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  // One always-masked column to start with, so the past is never an empty tensor.
  private pastLen = 1;
  private pastMask: Float32Array = new Float32Array(0);
  private pastKeys: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));
  private pastValues: Float32Array[] = range(LAYERS).map(() => new Float32Array(0));

  get releasedRows(): number {
    return this.live.filter((l) => !l).length;
  }

  /** Put each prompt in a row (released rows first, then new rows at the end); returns the rows, in order. */
  add(prompts: readonly EncodedPrompt[]): number[] {
    if (prompts.length === 0) return [];
    const longest = Math.max(...prompts.map((p) => p.length));
    if (longest > this.sourceLen) this.relayout(range(this.rows), Math.ceil(longest / SOURCE_STEP) * SOURCE_STEP, 0);
    const free = range(this.rows).filter((r) => !this.live[r]);
    const appended = prompts.length - Math.min(free.length, prompts.length);
    if (appended > 0) this.grow(this.rows + appended);
    const rows = prompts.map((_, i) => (i < free.length ? free[i]! : this.rows - appended + i - free.length));
    prompts.forEach((p, i) => this.place(rows[i]!, p));
    return rows;
  }

  /** The sequences in these rows are done; their rows may be reused. */
  release(rows: readonly number[]): void {
    for (const r of rows) this.live[r] = false;
  }

  /**
   * Drop released rows and unused cache columns if worthwhile (or `force`). Returns the surviving old
   * row indices in their new order, or undefined when nothing moved.
   */
  compact(force = false): number[] | undefined {
    const keep = range(this.rows).filter((r) => this.live[r]);
    const released = this.rows - keep.length;
    const unusedColumns = this.unusedLeadingColumns(keep);
    const worthIt = keep.length === 0 || released * 4 >= this.rows || unusedColumns >= TRIM_COLUMNS;
    if ((!force && !worthIt) || (released === 0 && unusedColumns === 0)) return undefined;
    if (keep.length === 0) {
      this.reset();
      return [];
    }
    this.relayout(keep, this.sourceLen, unusedColumns);
    return keep;
  }

  stepInput(tokens: number[], positions: number[]): DecoderStepInput {
    return {
      batch: this.rows,
      tokens,
      positions,
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

  /** Take the step's present keys/values as the new past; every row's new column is real. */
  advance(out: DecoderStepOutput): void {
    const pastLen = this.pastLen + 1;
    const mask = new Float32Array(this.rows * pastLen);
    for (let r = 0; r < this.rows; r++) {
      mask.set(this.pastMask.subarray(r * this.pastLen, (r + 1) * this.pastLen), r * pastLen);
      mask[r * pastLen + this.pastLen] = 1;
    }
    this.pastMask = mask;
    this.pastKeys = out.presentKeys;
    this.pastValues = out.presentValues;
    this.pastLen = pastLen;
  }

  /** Write a prompt's memory into row r and hide the row's old cache columns. */
  private place(r: number, p: EncodedPrompt): void {
    for (let l = 0; l < LAYERS; l++) {
      writeRow(this.memoryKeys[l]!, r, this.sourceLen, p.memoryKeys[l]!, p.length);
      writeRow(this.memoryValues[l]!, r, this.sourceLen, p.memoryValues[l]!, p.length);
    }
    this.memoryMask.fill(0, r * this.sourceLen, (r + 1) * this.sourceLen).fill(1, r * this.sourceLen, r * this.sourceLen + p.length);
    this.pastMask.fill(0, r * this.pastLen, (r + 1) * this.pastLen);
    this.live[r] = true;
  }

  /** Add empty (released) rows at the end. */
  private grow(rows: number): void {
    const extend = (a: Float32Array, rowSize: number): Float32Array => {
      const out = new Float32Array(rows * rowSize);
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
    for (let r = this.rows; r < rows; r++) this.live[r] = false;
    this.rows = rows;
  }

  /** Rebuild with only `keep` rows (in that order), memory width `sourceLen`, dropping `dropColumns` leading cache columns. */
  private relayout(keep: readonly number[], sourceLen: number, dropColumns: number): void {
    const pastLen = this.pastLen - dropColumns;
    const select = (a: Float32Array, srcLen: number, dstLen: number, fromCol: number, cols: number) => {
      const out = new Float32Array(keep.length * H * dstLen * HEAD_DIM);
      keep.forEach((r, i) => copyRow(out, i, dstLen, a, r, srcLen, fromCol, cols));
      return out;
    };
    const memoryCols = Math.min(this.sourceLen, sourceLen);
    this.memoryKeys = this.memoryKeys.map((a) => select(a, this.sourceLen, sourceLen, 0, memoryCols));
    this.memoryValues = this.memoryValues.map((a) => select(a, this.sourceLen, sourceLen, 0, memoryCols));
    this.pastKeys = this.pastKeys.map((a) => select(a, this.pastLen, pastLen, dropColumns, pastLen));
    this.pastValues = this.pastValues.map((a) => select(a, this.pastLen, pastLen, dropColumns, pastLen));
    const memoryMask = new Float32Array(keep.length * sourceLen);
    const pastMask = new Float32Array(keep.length * pastLen);
    keep.forEach((r, i) => {
      memoryMask.set(this.memoryMask.subarray(r * this.sourceLen, r * this.sourceLen + memoryCols), i * sourceLen);
      pastMask.set(this.pastMask.subarray(r * this.pastLen + dropColumns, (r + 1) * this.pastLen), i * pastLen);
    });
    this.memoryMask = memoryMask;
    this.pastMask = pastMask;
    this.live = keep.map((r) => this.live[r]!);
    this.sourceLen = sourceLen;
    this.pastLen = pastLen;
    this.rows = keep.length;
  }

  /** Leading cache columns that no kept row attends to (at least one column always stays). */
  private unusedLeadingColumns(keep: readonly number[]): number {
    let first = this.pastLen - 1;
    for (const r of keep) {
      for (let c = 0; c < first; c++) {
        if (this.pastMask[r * this.pastLen + c] === 1) {
          first = c;
          break;
        }
      }
    }
    return first;
  }

  private reset(): void {
    this.rows = 0;
    this.live = [];
    this.sourceLen = 0;
    this.memoryMask = new Float32Array(0);
    this.memoryKeys = range(LAYERS).map(() => new Float32Array(0));
    this.memoryValues = range(LAYERS).map(() => new Float32Array(0));
    this.pastLen = 1;
    this.pastMask = new Float32Array(0);
    this.pastKeys = range(LAYERS).map(() => new Float32Array(0));
    this.pastValues = range(LAYERS).map(() => new Float32Array(0));
  }
}

/** Copy `cols` positions of row srcRow ([*, H, srcLen, dh], from column srcCol) to row dstRow ([*, H, dstLen, dh], column 0). */
function copyRow(dst: Float32Array, dstRow: number, dstLen: number, src: Float32Array, srcRow: number, srcLen: number, srcCol: number, cols: number): void {
  for (let h = 0; h < H; h++) {
    const from = ((srcRow * H + h) * srcLen + srcCol) * HEAD_DIM;
    dst.set(src.subarray(from, from + cols * HEAD_DIM), (dstRow * H + h) * dstLen * HEAD_DIM);
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
