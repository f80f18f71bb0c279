import { readFile } from 'node:fs/promises';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { HEAD_DIM, MASKED_SCORE, MODEL_DIMS, SPECIAL_TOKENS, positionalEncoding, weightNames } from '../../images/model-server/src/model-spec.js';
import { OnnxGraphBuilder } from './onnx-graph-builder.js';

const { onnx } = onnxProto;

/**
 * Writes the trained weights as two ONNX graphs (opset 17) for the server's incremental decoding:
 *
 * encoder.onnx  input_ids [batch, source_len] int64 (PAD-padded)
 *               → for each decoder layer l the cross-attention keys/values of the encoder's memory,
 *                 memory_key_l / memory_value_l [batch, 4, source_len, 32] (computed once per prompt
 *                 instead of once per generated token).
 * decoder.onnx  one new token per sequence: input_ids [batch, 1], positions [batch, 1] int64,
 *               memory_key_l / memory_value_l, memory_mask [batch, source_len] (1 = real token),
 *               a key/value cache past_key_l / past_value_l [batch, 4, past_len, 32] with past_mask
 *               [batch, past_len] (1 = a column this row attends to; the caller keeps the cache at a
 *               fixed capacity and masks the columns not written yet)
 *               → logits [batch, 1000] for the next token and new_key_values [batch, layers·2·128]:
 *                 this token's keys and values, per row layer 0 keys, layer 0 values, layer 1 keys,
 *                 layer 1 values (each 4 heads × 32), which the caller writes into its cache.
 *
 * The graphs are laid out for ONNX Runtime on one CPU thread: a decoder row is a [batch, d_model]
 * matrix, so every projection is one Gemm with its bias; each layer's query/key/value projections
 * are one Gemm over the concatenated weights (Concat/Mul of initializers, folded when the session
 * loads: the files keep the trained weights under their own names, which the test oracle reads);
 * the cache is only read, never copied (attention over the past and over the new token are computed
 * apart and joined in the small score tensor), and graph outputs are written by the node that
 * computes them (no Identity copies).
 */
export type WeightArrays = Map<string, { data: Float32Array; shape: number[] }>;

const { dModel: D, heads: H } = MODEL_DIMS;
const LN_EPSILON = 1e-5;

class TransformerGraph {
  readonly g: OnnxGraphBuilder;
  constructor(
    name: string,
    private readonly weights: WeightArrays,
  ) {
    this.g = new OnnxGraphBuilder(name);
  }

  w(name: string): string {
    const w = this.weights.get(name);
    if (!w) throw new Error(`missing weight ${name}`);
    return this.g.weight(name, w.data, w.shape);
  }

  /** Token embedding × sqrt(d_model) (the scale the training used). */
  embed(ids: string): string {
    return this.g.op('Mul', [this.g.op('Gather', [this.w(weightNames.embedding), ids]), this.g.floatConst([Math.sqrt(D)])]);
  }

  positions(): string {
    return this.g.weight('positional_encoding', positionalEncoding(), [MODEL_DIMS.maxPositions, D]);
  }

  /** x [N, in] · W + b as one Gemm; `scale` multiplies weight and bias (folded at load). */
  linear(x: string, p: string, scale = 1): string {
    return this.g.op('Gemm', [x, this.scaled(this.w(`${p}.weight`), scale), this.scaled(this.w(`${p}.bias`), scale)]);
  }

  /** One Gemm for several projections of the same input: weights side by side, [in, Σ out]. */
  fusedLinear(x: string, parts: Array<{ p: string; scale?: number }>): string {
    const weight = this.g.op(
      'Concat',
      parts.map(({ p, scale }) => this.scaled(this.w(`${p}.weight`), scale ?? 1)),
      { axis: 1 },
    );
    const bias = this.g.op(
      'Concat',
      parts.map(({ p, scale }) => this.scaled(this.w(`${p}.bias`), scale ?? 1)),
      { axis: 0 },
    );
    return this.g.op('Gemm', [x, weight, bias]);
  }

  scaled(initializer: string, scale: number): string {
    return scale === 1 ? initializer : this.g.op('Mul', [initializer, this.g.floatConst([scale])]);
  }

  norm(x: string, p: string): string {
    return this.g.op('LayerNormalization', [x, this.w(`${p}.weight`), this.w(`${p}.bias`)], { axis: -1, epsilon: { float: LN_EPSILON } });
  }

  /** Mask [B, L] of 1 (attend) / 0 (ignore) → additive score bias [B, 1, 1, L]. */
  maskBias(mask: string): string {
    const hidden = this.g.op('Sub', [this.g.floatConst([1]), mask]);
    return this.g.op('Unsqueeze', [this.g.op('Mul', [hidden, this.g.floatConst([MASKED_SCORE])]), this.g.intConst([1, 2])]);
  }

  /** Softmax attention of queries q [B, H, Tq, dh] (already scaled) over keys/values [B, H, Tk, dh]. */
  attend(q: string, k: string, v: string, bias: string): string {
    const scores = this.g.op('Add', [this.g.op('MatMul', [q, this.g.op('Transpose', [k], { perm: [0, 1, 3, 2] })]), bias]);
    return this.g.op('MatMul', [this.g.op('Softmax', [scores], { axis: -1 }), v]);
  }

  feedForward(x: string, p: string): string {
    const hidden = this.g.op('Relu', [this.g.op('Gemm', [x, this.w(`${p}.w1`), this.w(`${p}.b1`)])]);
    return this.g.op('Gemm', [hidden, this.w(`${p}.w2`), this.w(`${p}.b2`)]);
  }

  /**
   * [N, parts·D] rows of a fused projection (N = B·T) → `parts` tensors [B, H, T, dh], with one
   * Transpose for all of them. `bt` is the int64 [B, T] shape.
   */
  splitHeads(x: string, bt: string, parts: number): string[] {
    const shape = this.g.op('Concat', [bt, this.g.intConst([parts, H, HEAD_DIM])], { axis: 0 });
    const t = this.g.op('Transpose', [this.g.op('Reshape', [x, shape])], { perm: [2, 0, 3, 1, 4] });
    return this.g.ops('Split', [t], parts, { axis: 0 }).map((part) => this.g.op('Squeeze', [part, this.g.intConst([0])]));
  }
}

const SCALE = 1 / Math.sqrt(HEAD_DIM);

export function exportEncoder(weights: WeightArrays): Uint8Array {
  const t = new TransformerGraph('strata-encoder', weights);
  const { g } = t;
  const ids = g.input('input_ids', 'int64', ['batch', 'source_len']);
  const bt = g.op('Shape', [ids]);
  const sourceLen = g.op('Shape', [ids], { start: 1, end: 2 });
  const pe = g.op('Slice', [t.positions(), g.intConst([0]), sourceLen, g.intConst([0])]);
  // Every position is a row of one [B·S, D] matrix: each projection is a single Gemm.
  let x = g.op('Reshape', [g.op('Add', [t.embed(ids), pe]), g.intConst([-1, D])]);
  const notPad = g.op('Cast', [g.op('Not', [g.op('Equal', [ids, g.intConst([SPECIAL_TOKENS.PAD], [])])])], { to: 1 });
  const bias = t.maskBias(notPad);
  for (let l = 0; l < MODEL_DIMS.encoderLayers; l++) {
    const p = weightNames.encoderLayer(l);
    const a = `${p}.self_attn`;
    const qkv = t.fusedLinear(t.norm(x, `${p}.norm1`), [{ p: `${a}.q`, scale: SCALE }, { p: `${a}.k` }, { p: `${a}.v` }]);
    const [q, k, v] = t.splitHeads(qkv, bt, 3) as [string, string, string];
    // [B, H, S, dh] → [B·S, D]
    const merged = g.op('Reshape', [g.op('Transpose', [t.attend(q, k, v, bias)], { perm: [0, 2, 1, 3] }), g.intConst([-1, D])]);
    x = g.op('Add', [x, t.linear(merged, `${a}.o`)]);
    x = g.op('Add', [x, t.feedForward(t.norm(x, `${p}.norm2`), `${p}.ff`)]);
  }
  const memory = t.norm(x, weightNames.encoderNorm);
  // Both decoder layers' cross-attention keys and values of the memory: one Gemm, one Transpose.
  const parts: Array<{ p: string }> = [];
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    const a = `${weightNames.decoderLayer(l)}.cross_attn`;
    parts.push({ p: `${a}.k` }, { p: `${a}.v` });
  }
  const kv = t.splitHeads(t.fusedLinear(memory, parts), bt, parts.length);
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    g.output(kv[2 * l]!, `memory_key_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]);
    g.output(kv[2 * l + 1]!, `memory_value_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]);
  }
  return g.encode('Strata tiny transformer encoder (see images/model-server/model/model-card.json)');
}

export function exportDecoder(weights: WeightArrays): Uint8Array {
  const t = new TransformerGraph('strata-decoder', weights);
  const { g } = t;
  const ids = g.input('input_ids', 'int64', ['batch', 1]);
  const positions = g.input('positions', 'int64', ['batch', 1]);
  const memoryMask = g.input('memory_mask', 'float', ['batch', 'source_len']);
  const pastMask = g.input('past_mask', 'float', ['batch', 'past_len']);
  const memoryKV: Array<[string, string]> = [];
  const pastKV: Array<[string, string]> = [];
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    memoryKV.push([
      g.input(`memory_key_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]),
      g.input(`memory_value_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]),
    ]);
    pastKV.push([
      g.input(`past_key_${l}`, 'float', ['batch', H, 'past_len', HEAD_DIM]),
      g.input(`past_value_${l}`, 'float', ['batch', H, 'past_len', HEAD_DIM]),
    ]);
  }
  const flat = g.intConst([-1]);
  // One row of [B, D] per sequence.
  let x = g.op('Add', [t.embed(g.op('Reshape', [ids, flat])), g.op('Gather', [t.positions(), g.op('Reshape', [positions, flat])])]);
  const rowHeads = g.intConst([-1, H, 1, HEAD_DIM]);
  const heads = (v: string) => g.op('Reshape', [v, rowHeads]);
  const rows = (v: string) => g.op('Reshape', [v, g.intConst([-1, D])]);
  const pastBias = t.maskBias(pastMask);
  const crossBias = t.maskBias(memoryMask);
  // Split sizes of the self-attention probabilities: the past's columns, then the new token's one.
  const pastAndNew = g.op('Concat', [g.op('Shape', [pastMask], { start: 1, end: 2 }), g.intConst([1])], { axis: 0 });
  const newKeyValues: string[] = [];
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    const p = weightNames.decoderLayer(l);
    const sa = `${p}.self_attn`;
    const [q, k, v] = g.ops('Split', [t.fusedLinear(t.norm(x, `${p}.norm1`), [{ p: `${sa}.q`, scale: SCALE }, { p: `${sa}.k` }, { p: `${sa}.v` }])], 3, {
      axis: 1,
    });
    newKeyValues.push(k!, v!);
    const qh = heads(q!);
    // Scores over the cache [B, H, 1, past_len] and over the token itself [B, H, 1, 1]; one softmax.
    const pastScores = g.op('Add', [g.op('MatMul', [qh, g.op('Transpose', [pastKV[l]![0]], { perm: [0, 1, 3, 2] })]), pastBias]);
    const selfScore = g.op('ReduceSum', [g.op('Mul', [qh, heads(k!)]), g.intConst([-1])], { keepdims: 1 });
    const probs = g.op('Softmax', [g.op('Concat', [pastScores, selfScore], { axis: 3 })], { axis: -1 });
    const [pastProbs, selfProb] = g.ops('Split', [probs, pastAndNew], 2, { axis: 3 });
    const context = g.op('Add', [g.op('MatMul', [pastProbs!, pastKV[l]![1]]), g.op('Mul', [selfProb!, heads(v!)])]);
    x = g.op('Add', [x, t.linear(rows(context), `${sa}.o`)]);
    const ca = `${p}.cross_attn`;
    const cq = heads(t.linear(t.norm(x, `${p}.norm2`), `${ca}.q`, SCALE));
    x = g.op('Add', [x, t.linear(rows(t.attend(cq, memoryKV[l]![0], memoryKV[l]![1], crossBias)), `${ca}.o`)]);
    x = g.op('Add', [x, t.feedForward(t.norm(x, `${p}.norm3`), `${p}.ff`)]);
  }
  // Output projection tied to the embedding: logits = h · Eᵀ + b.
  const logits = g.op('Gemm', [t.norm(x, weightNames.decoderNorm), t.w(weightNames.embedding), t.w(weightNames.outputBias)], { transB: 1 });
  g.output(logits, 'logits', 'float', ['batch', MODEL_DIMS.vocabSize]);
  g.output(g.op('Concat', newKeyValues, { axis: 1 }), 'new_key_values', 'float', ['batch', MODEL_DIMS.decoderLayers * 2 * D]);
  return g.encode('Strata tiny transformer decoder, one token per step (see images/model-server/model/model-card.json)');
}

/**
 * The trained weights back from exported graphs (their initializers keep the weights' names): lets
 * `npm run train-model -- --export-only --from-onnx DIR` redo the export of a committed model whose
 * training checkpoint is not at hand. With `shapes`, exactly those weights (checked); without, every
 * float initializer of both graphs (what the exporter does not ask for is ignored by it).
 */
export async function weightsFromOnnx(modelDir: string, shapes?: ReadonlyArray<readonly [string, number[]]>): Promise<WeightArrays> {
  const found: WeightArrays = new Map();
  for (const file of ['encoder.onnx', 'decoder.onnx']) {
    const model = onnx.ModelProto.decode(await readFile(path.join(modelDir, file)));
    for (const t of model.graph!.initializer!) {
      if (t.dataType !== onnx.TensorProto.DataType.FLOAT || !t.rawData) continue;
      found.set(t.name!, { data: new Float32Array(Uint8Array.from(t.rawData).buffer), shape: t.dims!.map(Number) });
    }
  }
  if (!shapes) return found;
  const weights: WeightArrays = new Map();
  for (const [name, shape] of shapes) {
    const w = found.get(name);
    const size = shape.reduce((a, b) => a * b, 1);
    if (!w || w.data.length !== size) throw new Error(`${modelDir}: no initializer ${name} of ${size} floats`);
    weights.set(name, { data: w.data, shape: [...shape] });
  }
  return weights;
}
