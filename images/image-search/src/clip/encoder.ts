// CLIP image and text encoders on onnxruntime-node; every embedding comes back L2-normalised.
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { MODEL_FILES } from './model-files.js';
import { preprocessImages, IMAGE_SIZE } from './preprocess.js';
import { ClipTokenizer, CONTEXT_LENGTH } from './tokenizer.js';

export type ExecutionProvider = 'cpu' | 'cuda';

export interface Embedder {
  readonly dim: number;
  encodeImages(images: Array<Buffer | string>): Promise<Float32Array>;
  encodeTexts(texts: string[]): Promise<Float32Array>;
}

export function normalize(vectors: Float32Array, dim: number): Float32Array {
  for (let r = 0; r < vectors.length / dim; r++) {
    let s = 0;
    for (let j = 0; j < dim; j++) s += vectors[r * dim + j] ** 2;
    const inv = 1 / Math.sqrt(s || 1);
    for (let j = 0; j < dim; j++) vectors[r * dim + j] *= inv;
  }
  return vectors;
}

export class ClipEncoder implements Embedder {
  private constructor(
    private readonly image: ort.InferenceSession,
    private readonly text: ort.InferenceSession,
    readonly tokenizer: ClipTokenizer,
    readonly dim: number,
    private readonly batchSize: number,
    /** The execution provider in use, and why it is not the one asked for (CUDA unavailable). */
    readonly executionProvider: ExecutionProvider,
    readonly providerFallback?: string,
  ) {}

  /**
   * Load from a directory holding image_encoder.onnx, text_encoder.onnx, merges.txt (+ vocab.json).
   * `executionProvider: 'cuda'` runs on the GPU where onnxruntime's CUDA provider can load, and falls
   * back to the CPU (saying why in `providerFallback`) where it cannot.
   */
  static async load(dir: string, options: { threads?: number; batchSize?: number; executionProvider?: ExecutionProvider } = {}): Promise<ClipEncoder> {
    const sessionOptions = (provider: ExecutionProvider): ort.InferenceSession.SessionOptions => ({
      executionProviders: provider === 'cuda' ? ['cuda', 'cpu'] : ['cpu'],
      graphOptimizationLevel: 'all',
      ...(options.threads ? { intraOpNumThreads: options.threads } : {}),
    });
    let provider: ExecutionProvider = options.executionProvider ?? 'cpu';
    let providerFallback: string | undefined;
    const imageFile = path.join(dir, MODEL_FILES.image);
    let image: ort.InferenceSession;
    try {
      image = await ort.InferenceSession.create(imageFile, sessionOptions(provider));
    } catch (err) {
      if (provider !== 'cuda') throw err;
      providerFallback = `CUDA execution provider unavailable (${err instanceof Error ? err.message : String(err)}): running on the CPU`;
      provider = 'cpu';
      image = await ort.InferenceSession.create(imageFile, sessionOptions(provider));
    }
    const text = await ort.InferenceSession.create(path.join(dir, MODEL_FILES.text), sessionOptions(provider));
    for (const [session, input] of [
      [image, 'pixel_values'],
      [text, 'input_ids'],
    ] as const) {
      if (!session.inputNames.includes(input))
        throw new Error(`CLIP model in ${dir}: expected an input named ${input}, found ${session.inputNames.join(', ')}`);
    }
    const tokenizer = ClipTokenizer.fromDirectory(dir);
    // Probe the embedding width once with a blank text.
    const probe = await text.run({ input_ids: new ort.Tensor('int64', tokenizer.tokenize(['']), [1, CONTEXT_LENGTH]) });
    const dim = (probe[text.outputNames[0]].dims.at(-1) as number) ?? 512;
    return new ClipEncoder(image, text, tokenizer, dim, options.batchSize ?? 16, provider, providerFallback);
  }

  async encodeImages(images: Array<Buffer | string>): Promise<Float32Array> {
    const out = new Float32Array(images.length * this.dim);
    for (let start = 0; start < images.length; start += this.batchSize) {
      const batch = images.slice(start, start + this.batchSize);
      const pixels = await preprocessImages(batch);
      const result = await this.image.run({ pixel_values: new ort.Tensor('float32', pixels, [batch.length, 3, IMAGE_SIZE, IMAGE_SIZE]) });
      out.set(result[this.image.outputNames[0]].data as Float32Array, start * this.dim);
    }
    return normalize(out, this.dim);
  }

  async encodeTexts(texts: string[]): Promise<Float32Array> {
    const ids = this.tokenizer.tokenize(texts);
    const result = await this.text.run({ input_ids: new ort.Tensor('int64', ids, [texts.length, CONTEXT_LENGTH]) });
    return normalize(Float32Array.from(result[this.text.outputNames[0]].data as Float32Array), this.dim);
  }

  async close(): Promise<void> {
    await this.image.release();
    await this.text.release();
  }
}
