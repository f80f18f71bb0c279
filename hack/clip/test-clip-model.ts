// A small CLIP-shaped model for tests and offline demos, written as real ONNX graphs.
//
// Same interface as CLIP ViT-B/32 exported by hack/clip/export-clip.py:
//   image_encoder.onnx  pixel_values [N,3,224,224] float32 → image_embeds [N,512]
//   text_encoder.onnx   input_ids    [N,77] int64         → text_embeds  [N,512]
//   merges.txt + vocab.json, a self-consistent CLIP-style BPE vocabulary.
// Images are described by pooled colour (an 8x8 grid of mean colours) and texture (mean absolute
// Laplacian on a 4x4 grid); texts by the sum of per-token feature vectors in the same 240-d space,
// where colour words map to the features of a uniform image of that colour. One fixed random
// projection takes both to 512-d. So similar images give similar vectors, and "red" finds red images.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import type { onnx as OnnxTypes } from 'onnx-proto';
import { CLIP_MEAN, CLIP_STD } from '../../images/image-search/src/clip/preprocess.js';
import { ClipTokenizer, baseVocabulary, START_TOKEN, END_TOKEN, CONTEXT_LENGTH } from '../../images/image-search/src/clip/tokenizer.js';
import { MODEL_FILES, TEST_MODEL_MARK } from '../../images/image-search/src/clip/model-files.js';
import { mulberry32 } from '../../images/service-kit/src/random.js';

const { onnx } = onnxProto;
const EMBED = 512;
const GRID = 8;
const TEXTURE_GRID = 4;
const FEATURES = 3 * GRID * GRID + 3 * TEXTURE_GRID * TEXTURE_GRID;

export const COLOURS: Record<string, [number, number, number]> = {
  red: [220, 30, 30],
  green: [40, 170, 60],
  blue: [30, 60, 220],
  yellow: [240, 220, 40],
  orange: [245, 140, 20],
  purple: [130, 50, 170],
  pink: [245, 150, 190],
  brown: [130, 80, 40],
  black: [10, 10, 10],
  white: [250, 250, 250],
  gray: [128, 128, 128],
  grey: [128, 128, 128],
};

const WORDS = `a an the of and with in on at to for from by is are this that photo picture image drawing
cat dog bird fish horse cow pig sheep animal car truck bus train boat plane bicycle house tree flower
plant food fruit apple banana orange cake bread person man woman child people hat shirt shoe clothes
sun moon star sky cloud rain snow water sea beach mountain forest grass leaf city street road table
chair cup bottle ball toy book phone computer small big little large old new happy sad one two three`
  .split(/\s+/)
  .filter(Boolean);

function gaussian(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
}

/**
 * Merges that make each listed word a single token. A word is tokenized with the merges so far and
 * the leftmost pair of its pieces merged until one token remains; a new merge has the highest rank,
 * so it never changes how earlier words tokenize.
 */
export function buildVocabulary(words: string[]): { merges: Array<[string, string]>; vocab: Map<string, number> } {
  const merges: Array<[string, string]> = [];
  const tokens = baseVocabulary();
  const vocabOf = () => new Map([...tokens, START_TOKEN, END_TOKEN].map((t, i) => [t, i]));
  for (const word of words) {
    for (;;) {
      const pieces = new ClipTokenizer(merges, vocabOf()).pieces(word);
      if (pieces.length <= 1) break;
      merges.push([pieces[0], pieces[1]]);
      tokens.push(pieces[0] + pieces[1]);
    }
  }
  return { merges, vocab: vocabOf() };
}

const tensor = (name: string, dims: number[], data: Float32Array | BigInt64Array) =>
  onnx.TensorProto.create({
    name,
    dims,
    dataType: data instanceof Float32Array ? onnx.TensorProto.DataType.FLOAT : onnx.TensorProto.DataType.INT64,
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  });

const valueInfo = (name: string, elemType: number, dims: Array<number | string>) =>
  onnx.ValueInfoProto.create({
    name,
    type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) } } },
  });

const ints = (name: string, values: number[]) => onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });
const int = (name: string, value: number) => onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i: value });

function modelBytes(graph: OnnxTypes.IGraphProto): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: 7,
    producerName: 'strata make-test-clip',
    opsetImport: [{ domain: '', version: 13 }],
    graph,
  });
  return onnx.ModelProto.encode(model).finish();
}

function imageGraph(projection: Float32Array): Uint8Array {
  const laplacian = new Float32Array(3 * 9);
  for (let c = 0; c < 3; c++) laplacian.set([0, -1, 0, -1, 4, -1, 0, -1, 0], c * 9);
  const colourKernel = 224 / GRID;
  const textureKernel = 224 / TEXTURE_GRID;
  return modelBytes({
    name: 'strata_test_clip_image',
    input: [valueInfo('pixel_values', onnx.TensorProto.DataType.FLOAT, ['batch', 3, 224, 224])],
    output: [valueInfo('image_embeds', onnx.TensorProto.DataType.FLOAT, ['batch', EMBED])],
    initializer: [tensor('laplacian', [3, 1, 3, 3], laplacian), tensor('projection', [FEATURES, EMBED], projection)],
    node: [
      {
        opType: 'AveragePool',
        input: ['pixel_values'],
        output: ['colour_grid'],
        attribute: [ints('kernel_shape', [colourKernel, colourKernel]), ints('strides', [colourKernel, colourKernel])],
      },
      { opType: 'Flatten', input: ['colour_grid'], output: ['colour'], attribute: [int('axis', 1)] },
      {
        opType: 'Conv',
        input: ['pixel_values', 'laplacian'],
        output: ['edges'],
        attribute: [int('group', 3), ints('kernel_shape', [3, 3]), ints('pads', [1, 1, 1, 1])],
      },
      { opType: 'Abs', input: ['edges'], output: ['edge_strength'] },
      {
        opType: 'AveragePool',
        input: ['edge_strength'],
        output: ['texture_grid'],
        attribute: [ints('kernel_shape', [textureKernel, textureKernel]), ints('strides', [textureKernel, textureKernel])],
      },
      { opType: 'Flatten', input: ['texture_grid'], output: ['texture'], attribute: [int('axis', 1)] },
      { opType: 'Concat', input: ['colour', 'texture'], output: ['features'], attribute: [int('axis', 1)] },
      { opType: 'MatMul', input: ['features', 'projection'], output: ['image_embeds'] },
    ],
  });
}

function textGraph(table: Float32Array, vocabSize: number, projection: Float32Array): Uint8Array {
  return modelBytes({
    name: 'strata_test_clip_text',
    input: [valueInfo('input_ids', onnx.TensorProto.DataType.INT64, ['batch', CONTEXT_LENGTH])],
    output: [valueInfo('text_embeds', onnx.TensorProto.DataType.FLOAT, ['batch', EMBED])],
    initializer: [
      tensor('token_features', [vocabSize, FEATURES], table),
      tensor('projection', [FEATURES, EMBED], projection),
      tensor('sequence_axis', [1], BigInt64Array.from([1n])),
    ],
    node: [
      { opType: 'Gather', input: ['token_features', 'input_ids'], output: ['per_token'], attribute: [int('axis', 0)] },
      { opType: 'ReduceSum', input: ['per_token', 'sequence_axis'], output: ['features'], attribute: [int('keepdims', 0)] },
      { opType: 'MatMul', input: ['features', 'projection'], output: ['text_embeds'] },
    ],
  });
}

/** The image features (before projection) of a uniform image of one colour. */
function uniformColourFeatures(rgb: [number, number, number]): Float32Array {
  const f = new Float32Array(FEATURES);
  for (let c = 0; c < 3; c++) f.fill((rgb[c] / 255 - CLIP_MEAN[c]) / CLIP_STD[c], c * GRID * GRID, (c + 1) * GRID * GRID);
  return f;
}

/** Write the test model into `dir`; deterministic for a given seed. */
export function writeTestClipModel(dir: string, seed = 20240601): void {
  mkdirSync(dir, { recursive: true });
  const rand = mulberry32(seed);
  const projection = new Float32Array(FEATURES * EMBED);
  for (let i = 0; i < projection.length; i++) projection[i] = gaussian(rand) / Math.sqrt(FEATURES);

  const { merges, vocab } = buildVocabulary([...Object.keys(COLOURS), ...WORDS]);
  const tokenizer = new ClipTokenizer(merges, vocab);
  const table = new Float32Array(vocab.size * FEATURES);
  // Id 0 doubles as padding, and the special tokens carry no meaning: their rows stay zero.
  const silent = new Set([0, tokenizer.sot, tokenizer.eot]);
  for (let id = 0; id < vocab.size; id++) {
    if (silent.has(id)) continue;
    for (let j = 0; j < FEATURES; j++) table[id * FEATURES + j] = 0.25 * gaussian(rand);
  }
  for (const [word, rgb] of Object.entries(COLOURS)) {
    const [id] = tokenizer.encode(word);
    table.set(uniformColourFeatures(rgb), id * FEATURES);
  }

  writeFileSync(path.join(dir, MODEL_FILES.image), imageGraph(projection));
  writeFileSync(path.join(dir, MODEL_FILES.text), textGraph(table, vocab.size, projection));
  writeFileSync(path.join(dir, MODEL_FILES.merges), `${TEST_MODEL_MARK}\n` + merges.map(([a, b]) => `${a} ${b}`).join('\n') + '\n');
  writeFileSync(path.join(dir, MODEL_FILES.vocab), JSON.stringify(Object.fromEntries(vocab)));
  writeFileSync(
    path.join(dir, 'README.txt'),
    'Strata test CLIP model (not CLIP): pooled colour/texture features and colour words, projected to 512-d.\nWritten by `npm run make-test-clip`.\n',
  );
}
