import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { exportDecoder, exportEncoder, weightsFromOnnx } from '../../hack/train/export-onnx.js';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/app.js';
import { DecodeBatch } from '../../images/model-server/src/decode-batch.js';
import { MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { OnnxTransformer } from '../../images/model-server/src/onnx-transformer.js';
import { encodeChat } from '../../images/model-server/src/tokenizer.js';
import { ReferenceTransformer } from './reference-transformer.js';

const V = MODEL_DIMS.vocabSize;
const TOLERANCE = 2e-3;

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}

describe('model-server ONNX graphs vs the plain TypeScript oracle', () => {
  let model: OnnxTransformer;
  let oracle: ReferenceTransformer;

  before(async () => {
    [model, oracle] = await Promise.all([OnnxTransformer.load(DEFAULT_MODEL_DIR, { threads: 1 }), ReferenceTransformer.load(DEFAULT_MODEL_DIR)]);
  });
  after(async () => model.release());

  it("gives the oracle's logits at every step while sequences join, leave (the last row moving into their place), outgrow the cache and leave it too large", async () => {
    // Teacher-forced sequences with different prompt lengths (the third is longer than the batch's
    // memory width, forcing a re-layout); the second leaves while rows after it live (the last row
    // moves into its place) and the fourth joins at that moment; the fifth runs past the cache's first
    // capacity (16 columns: it grows while the row is written); the sixth joins late and outlives it,
    // growing the cache to 48 columns; the seventh joins just before the sixth leaves, and the cache
    // shrinks back to what it needs.
    const sequences = [
      { joinAt: 0, prompt: encodeChat([{ role: 'user', content: '10 11 12 13 14 15 16 17 18 19 20' }]), target: [SPECIAL_TOKENS.BOS, 500, 501, 502, 503, 504] },
      { joinAt: 0, prompt: encodeChat([{ role: 'user', content: '999' }]), target: [SPECIAL_TOKENS.BOS, 42, 43] },
      {
        joinAt: 2,
        prompt: encodeChat([
          { role: 'system', content: 'be terse' },
          { role: 'user', content: '300 301 302 303 304 305 306 307 308 309 310 311 312 313 314 315 316' },
        ]),
        target: [SPECIAL_TOKENS.BOS, 7, 300, 301, 302, 303, 304, 305],
      },
      { joinAt: 3, prompt: encodeChat([{ role: 'user', content: '77 78' }]), target: [SPECIAL_TOKENS.BOS, 77, 78, 79, 80, 81, 82, 83, 84, 85] },
      {
        joinAt: 4,
        prompt: encodeChat([{ role: 'user', content: '600 601 602' }]),
        target: [SPECIAL_TOKENS.BOS, ...Array.from({ length: 29 }, (_, i) => 600 + i)],
      },
      {
        joinAt: 20,
        prompt: encodeChat([{ role: 'user', content: '700 701' }]),
        target: [SPECIAL_TOKENS.BOS, ...Array.from({ length: 39 }, (_, i) => 700 + i)],
      },
      { joinAt: 58, prompt: encodeChat([{ role: 'user', content: '900 901 902' }]), target: [SPECIAL_TOKENS.BOS, 900, 901, 902, 903, 904, 905, 906] },
    ];
    const expected = sequences.map((s) => oracle.decode(oracle.encode(s.prompt), s.target));
    const batch = new DecodeBatch();
    let slots: number[] = [];
    const step = sequences.map(() => 0);
    const join = async (t: number) => {
      const joining = sequences.map((s, i) => ({ s, i })).filter(({ s }) => s.joinAt === t);
      if (joining.length === 0) return;
      // Prompts that join together are encoded together (padded to the longest).
      const rows = batch.add(await model.encode(joining.map(({ s }) => s.prompt)));
      rows.forEach((row, k) => (slots[row] = joining[k]!.i));
    };
    await join(0);
    let compared = 0;
    let moves = 0;
    let largestCache = 0;
    let shrank = false;
    for (let t = 0; slots.length > 0; t++) {
      batch.compact();
      const out = await model.decodeStep(
        batch.stepInput(
          slots.map((s) => sequences[s]!.target[step[s]!]!),
          slots.map((s) => step[s]!),
        ),
      );
      batch.advance(out);
      largestCache = Math.max(largestCache, batch.cacheColumns);
      if (batch.cacheColumns < largestCache) shrank = true;
      const done: number[] = [];
      slots.forEach((s, row) => {
        const diff = maxAbsDiff(out.logits.subarray(row * V, (row + 1) * V), expected[s]![step[s]!]!);
        expect(diff, `sequence ${s} step ${step[s]}`).to.be.below(TOLERANCE);
        compared++;
        if (++step[s]! === sequences[s]!.target.length) done.push(row);
      });
      const order = batch.release(done);
      moves += order.filter((old, row) => old !== row).length;
      slots = order.map((row) => slots[row]!);
      expect(batch.rows).to.equal(slots.length);
      await join(t + 1);
    }
    expect(compared).to.equal(sequences.reduce((n, s) => n + s.target.length, 0));
    expect(moves).to.be.greaterThan(0);
    expect(largestCache).to.be.greaterThan(32);
    expect(shrank, 'the cache shrank after the long rows left').to.equal(true);
  });

  it('the committed graphs are what the exporter writes for their weights (re-export with --from-onnx after changing it)', async () => {
    const weights = await weightsFromOnnx(DEFAULT_MODEL_DIR);
    const committed = async (file: string) => new Uint8Array(await readFile(path.join(DEFAULT_MODEL_DIR, file)));
    expect(Buffer.compare(exportEncoder(weights), await committed('encoder.onnx')), 'encoder.onnx').to.equal(0);
    expect(Buffer.compare(exportDecoder(weights), await committed('decoder.onnx')), 'decoder.onnx').to.equal(0);
  });

  it('encoder output does not depend on the padding added for other prompts in the batch', async () => {
    const short = encodeChat([{ role: 'user', content: '123 456' }]);
    const long = encodeChat([{ role: 'user', content: '10 20 30 40 50 60 70 80' }]);
    const [alone] = await model.encode([short]);
    const [padded] = await model.encode([short, long]);
    for (let l = 0; l < MODEL_DIMS.decoderLayers; l++) {
      expect(maxAbsDiff(alone!.memoryKeys[l]!, padded!.memoryKeys[l]!)).to.be.below(1e-4);
      expect(maxAbsDiff(alone!.memoryValues[l]!, padded!.memoryValues[l]!)).to.be.below(1e-4);
    }
  });
});
