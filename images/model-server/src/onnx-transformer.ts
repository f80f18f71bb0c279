import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { HEAD_DIM as HEAD_DIM_IMPORT, MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';

const { heads: H, decoderLayers: LAYERS, vocabSize: V, dModel: D } = MODEL_DIMS;
/** Floats per row of the decoder's new_key_values output: keys and values of every layer. */
const NEW_KV = LAYERS * 2 * D;
// A module-local copy: compiled to CommonJS (the worker thread), each use of an import is a getter call.
const HEAD_DIM = HEAD_DIM_IMPORT;

/** One prompt's encoder output in the form the decoder consumes: per decoder layer, keys/values [H, S, dh]. */
export interface EncodedPrompt {
  length: number;
  memoryKeys: Float32Array[];
  memoryValues: Float32Array[];
}

/**
 * The decoder inputs for one step of a batch (layout documented in hack/train/export-onnx.ts). The
 * arrays may be longer than the tensors they hold (a buffer with room for more rows): the first
 * batch × … elements are used, without a copy.
 */
export interface DecoderStepInput {
  batch: number;
  tokens: BigInt64Array;
  positions: BigInt64Array;
  sourceLen: number;
  memoryMask: Float32Array;
  memoryKeys: Float32Array[];
  memoryValues: Float32Array[];
  /** Columns of the cache tensors (its capacity; the columns a row does not attend to are masked). */
  pastLen: number;
  pastMask: Float32Array;
  pastKeys: Float32Array[];
  pastValues: Float32Array[];
}

/** Views of buffers the next decodeStep overwrites: use them before it. */
export interface DecoderStepOutput {
  /** [batch, vocab] next-token logits. */
  logits: Float32Array;
  /** [batch, layers, 2 (keys, values), H, dh]: this step's keys and values, for the cache. */
  newKeyValues: Float32Array;
}

export interface OnnxTransformerOptions {
  /**
   * ONNX Runtime intra-op threads (default 1; 0 lets the runtime choose). The graphs are tiny: one
   * thread avoids pool hand-offs and spinning, which cost more than they save on a shared 2-core box.
   */
  threads?: number;
  /** 'cuda' tries the CUDA execution provider first (a GPU node with onnxruntime's CUDA binaries), then the CPU. */
  executionProvider?: 'cpu' | 'cuda';
}

/** The exported encoder and decoder graphs, run with onnxruntime-node on the CPU. */
export class OnnxTransformer {
  private constructor(
    private readonly encoder: ort.InferenceSession,
    private readonly decoder: ort.InferenceSession,
  ) {}

  static async load(modelDir: string, opts: OnnxTransformerOptions = {}): Promise<OnnxTransformer> {
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: opts.executionProvider === 'cuda' ? ['cuda', 'cpu'] : ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: opts.threads ?? 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      // Shapes change every step (batch size, cache length): a growing arena would only hold memory.
      enableCpuMemArena: false,
      enableMemPattern: false,
      extra: { session: { intra_op: { allow_spinning: '0' } } },
    };
    // Both creations settle before this returns or throws: a thread that exits (the worker, after a
    // failed load) while ONNX Runtime still creates a session aborts the process.
    const settled = await Promise.allSettled([
      ort.InferenceSession.create(path.join(modelDir, 'encoder.onnx'), sessionOptions),
      ort.InferenceSession.create(path.join(modelDir, 'decoder.onnx'), sessionOptions),
    ]);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.release() : undefined)));
      throw failed.reason;
    }
    const [encoder, decoder] = settled.map((r) => (r as PromiseFulfilledResult<ort.InferenceSession>).value);
    return new OnnxTransformer(encoder!, decoder!);
  }

  /** load(), falling back to the CPU (and telling `onFallback`) when the CUDA provider cannot be loaded. */
  static async loadWithFallback(modelDir: string, opts: OnnxTransformerOptions, onFallback: (err: unknown) => void): Promise<OnnxTransformer> {
    try {
      return await OnnxTransformer.load(modelDir, opts);
    } catch (err) {
      if (opts.executionProvider !== 'cuda') throw err;
      onFallback(err);
      return OnnxTransformer.load(modelDir, { ...opts, executionProvider: 'cpu' });
    }
  }

  /** Encode several prompts in one run (PAD-padded to the longest), split back per prompt. */
  async encode(prompts: readonly number[][]): Promise<EncodedPrompt[]> {
    const batch = prompts.length;
    const sourceLen = Math.max(...prompts.map((p) => p.length));
    const ids = new BigInt64Array(batch * sourceLen).fill(BigInt(SPECIAL_TOKENS.PAD));
    prompts.forEach((p, b) => p.forEach((id, i) => (ids[b * sourceLen + i] = BigInt(id))));
    const out = await this.encoder.run({ input_ids: new ort.Tensor('int64', ids, [batch, sourceLen]) });
    const keys = range(LAYERS).map((l) => out[`memory_key_${l}`]!.data as Float32Array);
    const values = range(LAYERS).map((l) => out[`memory_value_${l}`]!.data as Float32Array);
    return prompts.map((p, b) => ({
      length: p.length,
      memoryKeys: keys.map((k) => sliceRow(k, b, sourceLen, p.length)),
      memoryValues: values.map((v) => sliceRow(v, b, sourceLen, p.length)),
    }));
  }

  /** Output buffers of decodeStep: valid until the next step. */
  private logits = new Float32Array(0);
  private newKeyValues = new Float32Array(0);

  async decodeStep(input: DecoderStepInput): Promise<DecoderStepOutput> {
    const { batch, sourceLen, pastLen } = input;
    // Tensors over the caller's buffers (onnxruntime-node reads them in place: no copy per step).
    const f32 = (data: Float32Array, dims: number[]) =>
      new ort.Tensor(
        'float32',
        data.subarray(
          0,
          dims.reduce((a, b) => a * b, 1),
        ),
        dims,
      );
    const i64 = (data: BigInt64Array) => new ort.Tensor('int64', data.subarray(0, batch), [batch, 1]);
    const memory = [batch, H, sourceLen, HEAD_DIM];
    const past = [batch, H, pastLen, HEAD_DIM];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: i64(input.tokens),
      positions: i64(input.positions),
      memory_mask: f32(input.memoryMask, [batch, sourceLen]),
      past_mask: f32(input.pastMask, [batch, pastLen]),
    };
    for (let l = 0; l < LAYERS; l++) {
      feeds[`memory_key_${l}`] = f32(input.memoryKeys[l]!, memory);
      feeds[`memory_value_${l}`] = f32(input.memoryValues[l]!, memory);
      feeds[`past_key_${l}`] = f32(input.pastKeys[l]!, past);
      feeds[`past_value_${l}`] = f32(input.pastValues[l]!, past);
    }
    // The outputs go into buffers kept from step to step (ONNX Runtime writes them in place): without
    // them it allocates both outputs on every run.
    if (this.logits.length < batch * V) {
      this.logits = new Float32Array(batch * V);
      this.newKeyValues = new Float32Array(batch * NEW_KV);
    }
    const logits = this.logits.subarray(0, batch * V);
    const newKeyValues = this.newKeyValues.subarray(0, batch * NEW_KV);
    await this.decoder.run(feeds, {
      logits: new ort.Tensor('float32', logits, [batch, V]),
      new_key_values: new ort.Tensor('float32', newKeyValues, [batch, NEW_KV]),
    });
    return { logits, newKeyValues };
  }

  async release(): Promise<void> {
    await Promise.all([this.encoder.release(), this.decoder.release()]);
  }
}

/**
 * Row b of a [B, H, S, dh] tensor, cut to its first `length` positions: [H, length, dh]. A prompt as
 * long as the longest in its run (no padding) is one contiguous block: a view, not a copy.
 */
function sliceRow(data: Float32Array, b: number, sourceLen: number, length: number): Float32Array {
  if (length === sourceLen) return data.subarray(b * H * sourceLen * HEAD_DIM, (b + 1) * H * sourceLen * HEAD_DIM);
  const out = new Float32Array(H * length * HEAD_DIM);
  for (let h = 0; h < H; h++) {
    const from = (b * H + h) * sourceLen * HEAD_DIM;
    out.set(data.subarray(from, from + length * HEAD_DIM), h * length * HEAD_DIM);
  }
  return out;
}

export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
