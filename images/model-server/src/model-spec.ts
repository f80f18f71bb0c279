/**
 * The tiny Strata transformer's fixed shape and vocabulary: shared by the training script, the ONNX
 * exporter, the test oracle and the server, so that all of them agree on ids and dimensions.
 */
export const MODEL_DIMS = {
  vocabSize: 1000,
  dModel: 128,
  heads: 4,
  dFF: 256,
  encoderLayers: 2,
  decoderLayers: 2,
  /** Rows of the sinusoidal position table baked into the graphs (prompt and output positions). */
  maxPositions: 128,
} as const;

export const HEAD_DIM = MODEL_DIMS.dModel / MODEL_DIMS.heads;

/** Special token ids. Everything from FIRST_CONTENT_TOKEN up to vocabSize-1 is a content token. */
export const SPECIAL_TOKENS = {
  PAD: 0,
  BOS: 1,
  EOS: 2,
  UNK: 3,
  SYSTEM: 4,
  USER: 5,
  ASSISTANT: 6,
  TOOL: 7,
  DEVELOPER: 8,
  /** Reserved, never produced by the tokenizer. */
  RESERVED: 9,
} as const;

export const FIRST_CONTENT_TOKEN = 10;
export const CONTENT_TOKEN_COUNT = MODEL_DIMS.vocabSize - FIRST_CONTENT_TOKEN;

/** Prompts longer than this (role markers and EOS included) are refused: the model never saw more. */
export const MAX_PROMPT_TOKENS = 64;
/** Upper bound of max_tokens: prompt and output positions share the 128-row position table. */
export const MAX_OUTPUT_TOKENS = 64;

/** Additive attention bias for masked positions (large negative, finite so softmax never sees -inf - -inf). */
export const MASKED_SCORE = -1e9;

/** Sinusoidal positional encoding (Vaswani et al.): row p, columns 2i and 2i+1 are sin/cos(p / 10000^(2i/d)). */
export function positionalEncoding(rows: number = MODEL_DIMS.maxPositions, d: number = MODEL_DIMS.dModel): Float32Array {
  const table = new Float32Array(rows * d);
  for (let p = 0; p < rows; p++) {
    for (let i = 0; i < d; i += 2) {
      const angle = p / Math.pow(10000, i / d);
      table[p * d + i] = Math.sin(angle);
      table[p * d + i + 1] = Math.cos(angle);
    }
  }
  return table;
}

/** Weight names used by training, the ONNX initializers and the oracle (one place, so they cannot drift). */
export const weightNames = {
  embedding: 'embedding',
  outputBias: 'output.bias',
  encoderNorm: 'encoder.norm',
  decoderNorm: 'decoder.norm',
  encoderLayer: (l: number) => `encoder.${l}`,
  decoderLayer: (l: number) => `decoder.${l}`,
} as const;
