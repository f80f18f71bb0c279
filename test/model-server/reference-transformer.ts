import { readFile } from 'node:fs/promises';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { HEAD_DIM, MODEL_DIMS, positionalEncoding, weightNames } from '../../images/model-server/src/model-spec.js';

const { onnx } = onnxProto;
const { dModel: D, heads: H, vocabSize: V } = MODEL_DIMS;

/**
 * Test oracle: the transformer's math written out in plain TypeScript (one sequence, no cache, no
 * padding), reading its weights from the ONNX files' initializers. If the exported graphs compute
 * the same logits, the graph wiring (attention, masks, norms, positions, cache) is right.
 */
export class ReferenceTransformer {
  private readonly pe = positionalEncoding();

  private constructor(private readonly weights: Map<string, Float32Array>) {}

  static async load(modelDir: string): Promise<ReferenceTransformer> {
    const weights = new Map<string, Float32Array>();
    for (const file of ['encoder.onnx', 'decoder.onnx']) {
      const model = onnx.ModelProto.decode(await readFile(path.join(modelDir, file)));
      for (const t of model.graph!.initializer!) {
        if (t.dataType !== onnx.TensorProto.DataType.FLOAT || !t.rawData) continue;
        const bytes = Uint8Array.from(t.rawData);
        weights.set(t.name!, new Float32Array(bytes.buffer));
      }
    }
    return new ReferenceTransformer(weights);
  }

  private w(name: string): Float32Array {
    const w = this.weights.get(name);
    if (!w) throw new Error(`no initializer ${name}`);
    return w;
  }

  /** Source ids → encoder memory, one row of D per position. */
  encode(sourceIds: readonly number[]): Float32Array[] {
    let x = this.embedSequence(sourceIds);
    for (let l = 0; l < MODEL_DIMS.encoderLayers; l++) {
      const p = weightNames.encoderLayer(l);
      x = this.selfAttention(x, p, () => true);
      x = add(
        x,
        x.map((r) => this.feedForward(this.norm(r, `${p}.norm2`), `${p}.ff`)),
      );
    }
    return x.map((r) => this.norm(r, weightNames.encoderNorm));
  }

  /** Teacher-forced decoder: logits (length V) for every position of targetIds. */
  decode(memory: Float32Array[], targetIds: readonly number[]): Float32Array[] {
    let x = this.embedSequence(targetIds);
    for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
      const p = weightNames.decoderLayer(l);
      x = this.selfAttention(x, p, (q, k) => k <= q);
      const n2 = x.map((r) => this.norm(r, `${p}.norm2`));
      x = add(
        x,
        this.attention(n2, memory, () => true, `${p}.cross_attn`),
      );
      x = add(
        x,
        x.map((r) => this.feedForward(this.norm(r, `${p}.norm3`), `${p}.ff`)),
      );
    }
    const embedding = this.w(weightNames.embedding);
    const bias = this.w(weightNames.outputBias);
    return x.map((r) => {
      const h = this.norm(r, weightNames.decoderNorm);
      const logits = new Float32Array(V);
      for (let v = 0; v < V; v++) {
        let s = bias[v]!;
        for (let d = 0; d < D; d++) s += h[d]! * embedding[v * D + d]!;
        logits[v] = s;
      }
      return logits;
    });
  }

  /** Embeddings of ids at positions 0, 1, 2, … */
  private embedSequence(ids: readonly number[]): Float32Array[] {
    return this.embed(
      ids,
      ids.map((_, i) => i),
    );
  }

  /** The residual self-attention sublayer of layer `p` (pre-norm `norm1`), attending where `mask(query, key)` holds. */
  private selfAttention(x: Float32Array[], p: string, mask: (q: number, k: number) => boolean): Float32Array[] {
    const n1 = x.map((r) => this.norm(r, `${p}.norm1`));
    return add(x, this.attention(n1, n1, mask, `${p}.self_attn`));
  }

  private embed(ids: readonly number[], positions: number[]): Float32Array[] {
    const embedding = this.w(weightNames.embedding);
    return ids.map((id, i) => {
      const row = new Float32Array(D);
      for (let d = 0; d < D; d++) row[d] = embedding[id * D + d]! * Math.sqrt(D) + this.pe[positions[i]! * D + d]!;
      return row;
    });
  }

  private linear(x: Float32Array, weight: string, bias: string): Float32Array {
    const w = this.w(weight);
    const b = this.w(bias);
    const outDim = b.length;
    const out = Float32Array.from(b);
    for (let i = 0; i < x.length; i++) for (let j = 0; j < outDim; j++) out[j]! += x[i]! * w[i * outDim + j]!;
    return out;
  }

  private norm(x: Float32Array, p: string): Float32Array {
    const mean = x.reduce((a, b) => a + b, 0) / x.length;
    const variance = x.reduce((a, b) => a + (b - mean) ** 2, 0) / x.length;
    const g = this.w(`${p}.weight`);
    const b = this.w(`${p}.bias`);
    return x.map((v, i) => ((v - mean) / Math.sqrt(variance + 1e-5)) * g[i]! + b[i]!);
  }

  private feedForward(x: Float32Array, p: string): Float32Array {
    return this.linear(
      this.linear(x, `${p}.w1`, `${p}.b1`).map((v) => Math.max(0, v)),
      `${p}.w2`,
      `${p}.b2`,
    );
  }

  /** Multi-head attention of queries xq over xkv; `visible(q, k)` says whether query q may see key k. */
  private attention(xq: Float32Array[], xkv: Float32Array[], visible: (q: number, k: number) => boolean, p: string): Float32Array[] {
    const q = xq.map((r) => this.linear(r, `${p}.q.weight`, `${p}.q.bias`));
    const k = xkv.map((r) => this.linear(r, `${p}.k.weight`, `${p}.k.bias`));
    const v = xkv.map((r) => this.linear(r, `${p}.v.weight`, `${p}.v.bias`));
    return q.map((qi, i) => {
      const context = new Float32Array(D);
      for (let h = 0; h < H; h++) {
        const o = h * HEAD_DIM;
        const scores = k.map((kj, j) => {
          if (!visible(i, j)) return -Infinity;
          let s = 0;
          for (let d = 0; d < HEAD_DIM; d++) s += qi[o + d]! * kj[o + d]!;
          return s / Math.sqrt(HEAD_DIM);
        });
        const max = Math.max(...scores);
        const exp = scores.map((s) => Math.exp(s - max));
        const total = exp.reduce((a, b) => a + b, 0);
        exp.forEach((e, j) => {
          for (let d = 0; d < HEAD_DIM; d++) context[o + d]! += (e / total) * v[j]![o + d]!;
        });
      }
      return this.linear(context, `${p}.o.weight`, `${p}.o.bias`);
    });
  }
}

function add(a: Float32Array[], b: Float32Array[]): Float32Array[] {
  return a.map((r, i) => r.map((v, d) => v + b[i]![d]!));
}
