import { HEAD_DIM, MASKED_SCORE, MODEL_DIMS, SPECIAL_TOKENS, positionalEncoding, weightNames } from '../../images/model-server/src/model-spec.js';
import { OnnxGraphBuilder, scalarFloatTensor } from './onnx-graph-builder.js';

/**
 * Writes the trained weights as two ONNX graphs (opset 17) for the server's incremental decoding:
 *
 * encoder.onnx  input_ids [batch, source_len] int64 (PAD-padded)
 *               → memory [batch, source_len, 128], and for each decoder layer l the cross-attention
 *                 keys/values of that memory, memory_key_l / memory_value_l [batch, 4, source_len, 32]
 *                 (computed once per prompt instead of once per generated token).
 * decoder.onnx  one new token per sequence: input_ids [batch, 1], positions [batch, 1] int64,
 *               memory_key_l / memory_value_l, memory_mask [batch, source_len] (1 = real token),
 *               past_key_l / past_value_l [batch, 4, past_len, 32] with past_mask [batch, past_len]
 *               → logits [batch, 1000] for the next token and present_key_l / present_value_l
 *                 (the past with this token's keys/values appended).
 */
export type WeightArrays = Map<string, { data: Float32Array; shape: number[] }>;

const { dModel: D, heads: H } = MODEL_DIMS;
const LN_EPSILON = 1e-5;

class TransformerGraph {
  readonly g: OnnxGraphBuilder;
  constructor(name: string, private readonly weights: WeightArrays) {
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

  linear(x: string, p: string): string {
    return this.g.op('Add', [this.g.op('MatMul', [x, this.w(`${p}.weight`)]), this.w(`${p}.bias`)]);
  }

  norm(x: string, p: string): string {
    return this.g.op('LayerNormalization', [x, this.w(`${p}.weight`), this.w(`${p}.bias`)], { axis: -1, epsilon: { float: LN_EPSILON } });
  }

  /** [B, T, D] → [B, H, T, dh] */
  heads(x: string): string {
    return this.g.op('Transpose', [this.g.op('Reshape', [x, this.g.intConst([0, 0, H, HEAD_DIM])])], { perm: [0, 2, 1, 3] });
  }

  /** Mask [B, L] of 1 (attend) / 0 (ignore) → additive score bias [B, 1, 1, L]. */
  maskBias(mask: string): string {
    const hidden = this.g.op('Sub', [this.g.floatConst([1]), mask]);
    return this.g.op('Unsqueeze', [this.g.op('Mul', [hidden, this.g.floatConst([MASKED_SCORE])]), this.g.intConst([1, 2])]);
  }

  /** Scaled dot-product attention over head-split q [B,H,Tq,dh], k/v [B,H,Tk,dh], then output projection. */
  attend(q: string, k: string, v: string, bias: string, p: string): string {
    const kT = this.g.op('Transpose', [k], { perm: [0, 1, 3, 2] });
    const scores = this.g.op('Add', [this.g.op('Mul', [this.g.op('MatMul', [q, kT]), this.g.floatConst([1 / Math.sqrt(HEAD_DIM)])]), bias]);
    const context = this.g.op('MatMul', [this.g.op('Softmax', [scores], { axis: -1 }), v]);
    const merged = this.g.op('Reshape', [this.g.op('Transpose', [context], { perm: [0, 2, 1, 3] }), this.g.intConst([0, 0, D])]);
    return this.linear(merged, `${p}.o`);
  }

  feedForward(x: string, p: string): string {
    const hidden = this.g.op('Relu', [this.g.op('Add', [this.g.op('MatMul', [x, this.w(`${p}.w1`)]), this.w(`${p}.b1`)])]);
    return this.g.op('Add', [this.g.op('MatMul', [hidden, this.w(`${p}.w2`)]), this.w(`${p}.b2`)]);
  }
}

export function exportEncoder(weights: WeightArrays): Uint8Array {
  const t = new TransformerGraph('strata-encoder', weights);
  const { g } = t;
  const ids = g.input('input_ids', 'int64', ['batch', 'source_len']);
  const sourceLen = g.op('Shape', [ids], { start: 1, end: 2 });
  const pe = g.op('Slice', [t.positions(), g.intConst([0]), sourceLen, g.intConst([0])]);
  let x = g.op('Add', [t.embed(ids), pe]);
  const notPad = g.op('Cast', [g.op('Not', [g.op('Equal', [ids, g.intConst([SPECIAL_TOKENS.PAD], [])])])], { to: 1 });
  const bias = t.maskBias(notPad);
  for (let l = 0; l < MODEL_DIMS.encoderLayers; l++) {
    const p = weightNames.encoderLayer(l);
    const n1 = t.norm(x, `${p}.norm1`);
    const a = `${p}.self_attn`;
    x = g.op('Add', [x, t.attend(t.heads(t.linear(n1, `${a}.q`)), t.heads(t.linear(n1, `${a}.k`)), t.heads(t.linear(n1, `${a}.v`)), bias, a)]);
    x = g.op('Add', [x, t.feedForward(t.norm(x, `${p}.norm2`), `${p}.ff`)]);
  }
  const memory = t.norm(x, weightNames.encoderNorm);
  g.output(memory, 'memory', 'float', ['batch', 'source_len', D]);
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    const a = `${weightNames.decoderLayer(l)}.cross_attn`;
    g.output(t.heads(t.linear(memory, `${a}.k`)), `memory_key_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]);
    g.output(t.heads(t.linear(memory, `${a}.v`)), `memory_value_${l}`, 'float', ['batch', H, 'source_len', HEAD_DIM]);
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
  let x = g.op('Add', [t.embed(ids), g.op('Gather', [t.positions(), positions])]);
  // The new token always sees itself: its mask column is ones.
  const selfMask = g.op('Concat', [pastMask, g.op('ConstantOfShape', [g.op('Shape', [ids])], { value: { tensor: scalarFloatTensor(1) } })], { axis: 1 });
  const selfBias = t.maskBias(selfMask);
  const crossBias = t.maskBias(memoryMask);
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    const p = weightNames.decoderLayer(l);
    const sa = `${p}.self_attn`;
    const n1 = t.norm(x, `${p}.norm1`);
    const keys = g.op('Concat', [pastKV[l]![0], t.heads(t.linear(n1, `${sa}.k`))], { axis: 2 });
    const values = g.op('Concat', [pastKV[l]![1], t.heads(t.linear(n1, `${sa}.v`))], { axis: 2 });
    g.output(keys, `present_key_${l}`, 'float', ['batch', H, 'present_len', HEAD_DIM]);
    g.output(values, `present_value_${l}`, 'float', ['batch', H, 'present_len', HEAD_DIM]);
    x = g.op('Add', [x, t.attend(t.heads(t.linear(n1, `${sa}.q`)), keys, values, selfBias, sa)]);
    const ca = `${p}.cross_attn`;
    const n2 = t.norm(x, `${p}.norm2`);
    x = g.op('Add', [x, t.attend(t.heads(t.linear(n2, `${ca}.q`)), memoryKV[l]![0], memoryKV[l]![1], crossBias, ca)]);
    x = g.op('Add', [x, t.feedForward(t.norm(x, `${p}.norm3`), `${p}.ff`)]);
  }
  const h = g.op('Reshape', [t.norm(x, weightNames.decoderNorm), g.intConst([-1, D])]);
  // Output projection tied to the embedding: logits = h · Eᵀ + b.
  const logits = g.op('Gemm', [h, t.w(weightNames.embedding), t.w(weightNames.outputBias)], { transB: 1 });
  g.output(logits, 'logits', 'float', ['batch', MODEL_DIMS.vocabSize]);
  return g.encode('Strata tiny transformer decoder, one token per step (see images/model-server/model/model-card.json)');
}
