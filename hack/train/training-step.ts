import { appendFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import cliProgress from 'cli-progress';
import { MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import type { WeightArrays } from './export-onnx.js';
import { weightShapes, type TfTransformer, type Weights } from './transformer-tf.js';

/** What both training tasks make. */
export interface TrainingBatch {
  /** [B, S] encoder ids, PAD-padded. */
  source: Int32Array;
  sourceLen: number;
  /** [B, T] decoder inputs (BOS + answer) and labels (answer + EOS), PAD-padded. */
  targetIn: Int32Array;
  targetOut: Int32Array;
  targetLen: number;
  size: number;
}

/** Linear warm-up, then inverse-square-root decay (the usual transformer schedule); `step` counts from 0. */
export function scheduledLearningRate(base: number, step: number, warmup: number): number {
  return base * Math.min((step + 1) / warmup, Math.sqrt(warmup / (step + 1)));
}

/**
 * Linear warm-up, then cosine decay to `floor` × base at `total` steps: the whole run is spent at
 * useful rates, and the last steps settle at a small one (inverse-square-root decay stays high to the end).
 */
export function cosineLearningRate(base: number, step: number, warmup: number, total: number, floor = 0.05): number {
  if (step < warmup) return (base * (step + 1)) / warmup;
  const progress = Math.min(1, (step - warmup) / Math.max(1, total - warmup));
  return base * (floor + (1 - floor) * 0.5 * (1 + Math.cos(Math.PI * progress)));
}

/**
 * A run's progress: a progress bar (off a terminal, in CI logs or pipes, a plain line every 10 s
 * instead of nothing) and the loss log (step, loss, token accuracy, seconds), one line per step.
 */
export class TrainingProgress {
  step = 0;
  lastLoss = NaN;
  /** Token accuracy, smoothed over the last ~20 steps. */
  recentAccuracy = 0;
  private readonly started = Date.now();
  private readonly bar: cliProgress.SingleBar;

  /** `offset`: the steps and seconds of the runs this one continues (their lines are already in the log). */
  constructor(
    label: string,
    maxSteps: number,
    private readonly logPath: string,
    private readonly offset = { steps: 0, seconds: 0 },
  ) {
    this.bar = new cliProgress.SingleBar(
      {
        format: `${label} |{bar}| {value}/{total} steps | loss {loss} | token acc {acc} | {elapsed}s`,
        hideCursor: true,
        noTTYOutput: true,
        notTTYSchedule: 10_000,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar.start(maxSteps, 0, { loss: '-', acc: '-', elapsed: 0 });
  }

  /** A new log with its header (a resumed run appends to the copy of its predecessor's instead). */
  static async newLog(logPath: string): Promise<void> {
    await writeFile(logPath, 'step,loss,token_accuracy,elapsed_s\n');
  }

  get seconds(): number {
    return (Date.now() - this.started) / 1000;
  }

  /** Record one step's loss and accuracy (the tensors are disposed). */
  async record(loss: tf.Scalar, accuracy: tf.Scalar): Promise<void> {
    this.lastLoss = (await loss.data())[0]!;
    const acc = (await accuracy.data())[0]!;
    loss.dispose();
    accuracy.dispose();
    this.step++;
    this.recentAccuracy = this.step === 1 ? acc : 0.95 * this.recentAccuracy + 0.05 * acc;
    const elapsed = this.seconds;
    this.bar.update(this.step, { loss: this.lastLoss.toFixed(4), acc: this.recentAccuracy.toFixed(3), elapsed: elapsed.toFixed(0) });
    await appendFile(
      this.logPath,
      `${this.offset.steps + this.step},${this.lastLoss.toFixed(5)},${acc.toFixed(4)},${(this.offset.seconds + elapsed).toFixed(1)}\n`,
    );
  }

  stop(): void {
    this.bar.stop();
    console.log(`trained ${this.step} steps in ${this.seconds.toFixed(0)} s, final loss ${this.lastLoss.toFixed(4)}; loss log: ${this.logPath}`);
  }
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
    model.training = true;
    let lossValue: tf.Scalar;
    try {
      lossValue = optimizer.minimize(() => lossAndAccuracy(model, batch, (logits) => (logitsKept = tf.keep(logits))), true)!;
    } finally {
      model.training = false;
    }
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
