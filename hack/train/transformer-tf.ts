import * as tf from '@tensorflow/tfjs';
import { HEAD_DIM, MASKED_SCORE, MODEL_DIMS, SPECIAL_TOKENS, positionalEncoding, weightNames } from '../../images/model-server/src/model-spec.js';

/**
 * The Strata transformer in tfjs, for training only. Pre-LayerNorm encoder–decoder with tied
 * input/output embeddings. The embedding's gradient is a one-hot × matrix product because the wasm
 * backend lacks a gradient for `gather`. The ONNX exporter and the test oracle implement the same math.
 */
export type Weights = Map<string, tf.Variable>;

/** Swap the last two axes. */
function swapLast(t: tf.Tensor): tf.Tensor {
  const perm = t.shape.map((_, i) => i);
  [perm[perm.length - 1], perm[perm.length - 2]] = [perm[perm.length - 2]!, perm[perm.length - 1]!];
  return tf.transpose(t, perm);
}

/**
 * a × b with a hand-written gradient that uses explicit transposes: the wasm backend's matMul with
 * transposeA/transposeB (what tfjs's own gradient uses) is about 10x slower than transpose + matMul.
 */
type CustomGradient = Parameters<typeof tf.customGrad>[0];

const matMul = tf.customGrad(((a: tf.Tensor, b: tf.Tensor, save: tf.GradSaveFunc) => {
  save([a, b]);
  return {
    value: tf.matMul(a, b),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => [tf.matMul(dy, swapLast(saved[1]!)), tf.matMul(swapLast(saved[0]!), dy)],
  };
}) as unknown as CustomGradient) as (a: tf.Tensor, b: tf.Tensor) => tf.Tensor;

/**
 * Embedding lookup: `gather` forward (cheap), and the gradient as one-hot(ids)ᵀ × dy, since the wasm
 * backend has no kernel for gather's own gradient.
 */
const embedLookup = tf.customGrad(((table: tf.Tensor, ids: tf.Tensor, save: tf.GradSaveFunc) => {
  save([ids]);
  return {
    value: tf.gather(table, ids),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const ids = saved[0]!;
      const oneHotT = tf.transpose(tf.oneHot(ids, table.shape[0]!).toFloat());
      return [tf.matMul(oneHotT, dy.reshape([ids.shape[0]!, table.shape[1]!])), tf.zerosLike(ids)];
    },
  };
}) as unknown as CustomGradient) as (table: tf.Tensor, ids: tf.Tensor) => tf.Tensor;

const { vocabSize: V, dModel: D, heads: H, dFF: F } = MODEL_DIMS;
const LN_EPSILON = 1e-5;

/** Every weight with its shape, in a stable order (the checkpoint and the exporter rely on it). */
export function weightShapes(): Array<[string, number[]]> {
  const shapes: Array<[string, number[]]> = [
    [weightNames.embedding, [V, D]],
    [weightNames.outputBias, [V]],
  ];
  const attention = (p: string) =>
    ['q', 'k', 'v', 'o'].flatMap(
      (m): Array<[string, number[]]> => [
        [`${p}.${m}.weight`, [D, D]],
        [`${p}.${m}.bias`, [D]],
      ],
    );
  const norm = (p: string): Array<[string, number[]]> => [
    [`${p}.weight`, [D]],
    [`${p}.bias`, [D]],
  ];
  const ff = (p: string): Array<[string, number[]]> => [
    [`${p}.w1`, [D, F]],
    [`${p}.b1`, [F]],
    [`${p}.w2`, [F, D]],
    [`${p}.b2`, [D]],
  ];
  for (let l = 0; l < MODEL_DIMS.encoderLayers; l++) {
    const p = weightNames.encoderLayer(l);
    shapes.push(...norm(`${p}.norm1`), ...attention(`${p}.self_attn`), ...norm(`${p}.norm2`), ...ff(`${p}.ff`));
  }
  shapes.push(...norm(weightNames.encoderNorm));
  for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
    const p = weightNames.decoderLayer(l);
    shapes.push(
      ...norm(`${p}.norm1`),
      ...attention(`${p}.self_attn`),
      ...norm(`${p}.norm2`),
      ...attention(`${p}.cross_attn`),
      ...norm(`${p}.norm3`),
      ...ff(`${p}.ff`),
    );
  }
  shapes.push(...norm(weightNames.decoderNorm));
  return shapes;
}

/** Fresh weights: scaled normal matrices, zero biases, unit LayerNorm gains. */
export function initWeights(seed: number): Weights {
  const weights: Weights = new Map();
  let s = seed;
  for (const [name, shape] of weightShapes()) {
    let init: tf.Tensor;
    if (name.endsWith('norm1.weight') || name.endsWith('norm2.weight') || name.endsWith('norm3.weight') || name.endsWith('norm.weight')) init = tf.ones(shape);
    else if (shape.length === 1) init = tf.zeros(shape);
    else if (name === weightNames.embedding) init = tf.randomNormal(shape, 0, 1 / Math.sqrt(D), 'float32', s++);
    else init = tf.randomNormal(shape, 0, 1 / Math.sqrt(shape[0]!), 'float32', s++);
    weights.set(name, tf.variable(init, true, name));
  }
  return weights;
}

export class TfTransformer {
  private readonly pe = tf.tensor2d(positionalEncoding(), [MODEL_DIMS.maxPositions, D]);
  /** Dropout on the embeddings and on each sublayer's output, applied only while `training` (trainStep sets it). */
  training = false;
  /** Each dropout mask's seed: the run's seed, then a count, so a run is the same with the same seed. */
  private maskCount = 0;

  constructor(
    readonly weights: Weights,
    private readonly dropoutRate = 0,
    private readonly seed = 0,
  ) {}

  private dropout<T extends tf.Tensor>(x: T): T {
    if (!this.training || this.dropoutRate === 0) return x;
    return tf.dropout(x, this.dropoutRate, undefined, this.seed * 1_000_003 + this.maskCount++) as T;
  }

  private w(name: string): tf.Tensor {
    const t = this.weights.get(name);
    if (!t) throw new Error(`missing weight ${name}`);
    return t;
  }

  private embed(ids: tf.Tensor2D): tf.Tensor3D {
    const [b, t] = ids.shape;
    const x = embedLookup(this.w(weightNames.embedding), ids.reshape([b * t]))
      .mul(Math.sqrt(D))
      .reshape([b, t, D]);
    return this.dropout(x.add(this.pe.slice([0, 0], [t, D])) as tf.Tensor3D);
  }

  private linear(x: tf.Tensor3D, weight: string, bias: string): tf.Tensor3D {
    const [b, t, d] = x.shape;
    const w = this.w(weight);
    return matMul(x.reshape([b * t, d]), w)
      .add(this.w(bias))
      .reshape([b, t, w.shape[1]!]);
  }

  private norm(x: tf.Tensor3D, p: string): tf.Tensor3D {
    const { mean, variance } = tf.moments(x, -1, true);
    return x
      .sub(mean)
      .div(variance.add(LN_EPSILON).sqrt())
      .mul(this.w(`${p}.weight`))
      .add(this.w(`${p}.bias`));
  }

  private heads(x: tf.Tensor3D): tf.Tensor4D {
    const [b, t] = x.shape;
    return x.reshape([b, t, H, HEAD_DIM]).transpose([0, 2, 1, 3]);
  }

  /** Multi-head attention; `bias` is added to the scores (masks), broadcast to [B, H, Tq, Tk]. */
  private attention(xq: tf.Tensor3D, xkv: tf.Tensor3D, bias: tf.Tensor, p: string): tf.Tensor3D {
    const [b, tq] = xq.shape;
    const q = this.heads(this.linear(xq, `${p}.q.weight`, `${p}.q.bias`));
    const k = this.heads(this.linear(xkv, `${p}.k.weight`, `${p}.k.bias`));
    const v = this.heads(this.linear(xkv, `${p}.v.weight`, `${p}.v.bias`));
    const scores = matMul(q, swapLast(k))
      .mul(1 / Math.sqrt(HEAD_DIM))
      .add(bias);
    const out = matMul(tf.softmax(scores, -1), v).transpose([0, 2, 1, 3]).reshape([b, tq, D]) as tf.Tensor3D;
    return this.linear(out, `${p}.o.weight`, `${p}.o.bias`);
  }

  private feedForward(x: tf.Tensor3D, p: string): tf.Tensor3D {
    return this.linear(tf.relu(this.linear(x, `${p}.w1`, `${p}.b1`)), `${p}.w2`, `${p}.b2`);
  }

  /** [B,S] ids → additive bias [B,1,1,S] that hides PAD positions. */
  static paddingBias(ids: tf.Tensor2D): tf.Tensor4D {
    const [b, s] = ids.shape;
    return tf.equal(ids, SPECIAL_TOKENS.PAD).toFloat().mul(MASKED_SCORE).reshape([b, 1, 1, s]);
  }

  encode(sourceIds: tf.Tensor2D): tf.Tensor3D {
    const bias = TfTransformer.paddingBias(sourceIds);
    let x = this.embed(sourceIds);
    for (let l = 0; l < MODEL_DIMS.encoderLayers; l++) {
      const p = weightNames.encoderLayer(l);
      const n1 = this.norm(x, `${p}.norm1`);
      x = x.add(this.dropout(this.attention(n1, n1, bias, `${p}.self_attn`)));
      x = x.add(this.dropout(this.feedForward(this.norm(x, `${p}.norm2`), `${p}.ff`)));
    }
    return this.norm(x, weightNames.encoderNorm);
  }

  /** Teacher-forced decoder: logits [B, T, V] for every target position. */
  decode(memory: tf.Tensor3D, sourceIds: tf.Tensor2D, targetIds: tf.Tensor2D): tf.Tensor3D {
    const [b, t] = targetIds.shape;
    const crossBias = TfTransformer.paddingBias(sourceIds);
    const causal = tf.linalg.bandPart(tf.ones([t, t]), -1, 0);
    const causalBias = tf.sub(1, causal).mul(MASKED_SCORE).reshape([1, 1, t, t]);
    let x = this.embed(targetIds);
    for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
      const p = weightNames.decoderLayer(l);
      const n1 = this.norm(x, `${p}.norm1`);
      x = x.add(this.dropout(this.attention(n1, n1, causalBias, `${p}.self_attn`)));
      x = x.add(this.dropout(this.attention(this.norm(x, `${p}.norm2`), memory, crossBias, `${p}.cross_attn`)));
      x = x.add(this.dropout(this.feedForward(this.norm(x, `${p}.norm3`), `${p}.ff`)));
    }
    const h = this.norm(x, weightNames.decoderNorm);
    return matMul(h.reshape([b * t, D]), tf.transpose(this.w(weightNames.embedding)))
      .add(this.w(weightNames.outputBias))
      .reshape([b, t, V]);
  }
}
