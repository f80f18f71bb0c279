import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import type { WeightArrays } from './export-onnx.js';
import { weightShapes, type TfTransformer, type Weights } from './transformer-tf.js';

/** Encoder ids [B,S] and decoder inputs/labels [B,T], PAD-padded (what both training tasks make). */
export interface TrainingBatch {
  source: Int32Array;
  sourceLen: number;
  targetIn: Int32Array;
  targetOut: Int32Array;
  targetLen: number;
  size: number;
}

/** Mean negative log-likelihood of the labels (PAD excluded) and the share predicted right, as tensors the caller disposes. */
function lossAndAccuracy(model: TfTransformer, batch: TrainingBatch, keepLogits: (logits: tf.Tensor) => void = () => {}): tf.Scalar {
  const source = tf.tensor2d(batch.source, [batch.size, batch.sourceLen], 'int32');
  const targetIn = tf.tensor2d(batch.targetIn, [batch.size, batch.targetLen], 'int32');
  const labels = tf.tensor1d(batch.targetOut, 'int32');
  const weight = tf.notEqual(labels, SPECIAL_TOKENS.PAD).toFloat();
  const logits = model.decode(model.encode(source), source, targetIn).reshape([-1, MODEL_DIMS.vocabSize]);
  keepLogits(logits);
  const nll = tf.neg(tf.sum(tf.mul(tf.logSoftmax(logits), tf.oneHot(labels, MODEL_DIMS.vocabSize)), -1));
  return tf.div(tf.sum(tf.mul(nll, weight)), tf.sum(weight)) as tf.Scalar;
}

/** One optimizer step (teacher forcing); returns the batch's loss and token accuracy. */
export function trainStep(model: TfTransformer, optimizer: tf.Optimizer, batch: TrainingBatch): [tf.Scalar, tf.Scalar] {
  return tf.tidy(() => {
    let logitsKept: tf.Tensor | undefined;
    const lossValue = optimizer.minimize(() => lossAndAccuracy(model, batch, (logits) => (logitsKept = tf.keep(logits))), true)!;
    const labels = tf.tensor1d(batch.targetOut, 'int32');
    const weight = tf.notEqual(labels, SPECIAL_TOKENS.PAD).toFloat();
    const correct = tf.mul(tf.equal(tf.argMax(logitsKept!, -1), labels).toFloat(), weight);
    const acc = tf.div(tf.sum(correct), tf.sum(weight)) as tf.Scalar;
    logitsKept!.dispose();
    return [lossValue, acc];
  });
}

/** Mean loss per label token over batches (no gradient), weighted by each batch's label count. */
export async function evaluateLoss(model: TfTransformer, batches: readonly TrainingBatch[]): Promise<number> {
  let total = 0;
  let tokens = 0;
  for (const batch of batches) {
    const loss = tf.tidy(() => lossAndAccuracy(model, batch));
    const n = batch.targetOut.reduce((c, id) => c + (id === SPECIAL_TOKENS.PAD ? 0 : 1), 0);
    total += (await loss.data())[0]! * n;
    tokens += n;
    loss.dispose();
  }
  return total / tokens;
}

export async function toArrays(weights: Weights): Promise<WeightArrays> {
  const arrays: WeightArrays = new Map();
  for (const [name, shape] of weightShapes()) arrays.set(name, { data: (await weights.get(name)!.data()) as Float32Array, shape });
  return arrays;
}

export async function saveCheckpoint(weights: Weights, dir: string): Promise<void> {
  const arrays = await toArrays(weights);
  const parts = [...arrays.values()].map((w) => Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength));
  await writeFile(path.join(dir, 'weights.bin'), Buffer.concat(parts));
}

export async function loadCheckpoint(dir: string): Promise<Weights> {
  const bytes = await readFile(path.join(dir, 'weights.bin'));
  const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const weights: Weights = new Map();
  let offset = 0;
  for (const [name, shape] of weightShapes()) {
    const size = shape.reduce((a, b) => a * b, 1);
    weights.set(name, tf.variable(tf.tensor(all.slice(offset, offset + size), shape), true, name));
    offset += size;
  }
  return weights;
}
