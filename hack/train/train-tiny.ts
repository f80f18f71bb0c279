/**
 * `npm run train-model -- --model strata-tiny`: trains the Strata tiny transformer on the copy task with tfjs (wasm backend,
 * offline), measures held-out exact-match accuracy, and writes the served model:
 *   images/model-server/model/{encoder.onnx, decoder.onnx, model-card.json, training-log.csv}
 * A checkpoint of the raw weights goes to data/train-model/ so `--export-only` can redo the ONNX export.
 *
 * Options: --steps N (max steps, default 3000)  --seconds N (time budget, default 480)
 *          --batch N (default 32)  --max-len N (content tokens per prompt, default 12)  --seed N
 *          --task copy|reverse  --lr X (peak learning rate, default 0.001)  --out DIR
 *          --checkpoint DIR (raw weights, default data/train-model)  --export-only  --resume (continue from it)
 *          --from-onnx DIR (with --export-only: take the weights from the ONNX graphs in DIR, e.g. the
 *          committed model, instead of the checkpoint, to redo its export after an exporter change)
 *          --force (replace the model in --out even when it scored higher on the held-out set)
 * The loss log (step, loss, token accuracy, seconds) grows in the checkpoint folder while training and
 * is copied beside the exported model as training-log.csv.
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { expectedAnswer, keyOf, makeBatch, mulberry32, randomExample, randomExampleOfLength, type Example, type Task } from './dataset.js';
import { exportDecoder, exportEncoder, weightsFromOnnx } from './export-onnx.js';
import { TfTransformer, initWeights, weightShapes, type Weights } from './transformer-tf.js';
import { TrainingProgress, loadCheckpoint, saveCheckpoint, scheduledLearningRate, toArrays, trainStep } from './training-step.js';

const { values: args } = parseArgs({
  options: {
    steps: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '480' },
    batch: { type: 'string', default: '32' },
    'max-len': { type: 'string', default: '12' },
    seed: { type: 'string', default: '7' },
    task: { type: 'string', default: 'copy' },
    model: { type: 'string', default: 'strata-tiny' },
    lr: { type: 'string', default: '0.001' },
    out: { type: 'string', default: 'images/model-server/model' },
    checkpoint: { type: 'string', default: 'data/train-model' },
    'export-only': { type: 'boolean', default: false },
    'from-onnx': { type: 'string' },
    resume: { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
  },
});

const task = args.task as Task;
if (task !== 'copy' && task !== 'reverse') throw new Error(`--task must be copy or reverse, got ${args.task}`);
const maxSteps = Number(args.steps);
const budgetMs = Number(args.seconds) * 1000;
const batchSize = Number(args.batch);
const maxLen = Number(args['max-len']);
const seed = Number(args.seed);
const baseLr = Number(args.lr);
const HELD_OUT_SIZE = 500;

await tf.setBackend('wasm');
await tf.ready();

const outDir = path.resolve(args.out);
const checkpointDir = path.resolve(args.checkpoint);
await mkdir(outDir, { recursive: true });
await mkdir(checkpointDir, { recursive: true });

// Held-out prompts come from their own seed and are never trained on.
const heldOutRand = mulberry32(seed * 7919 + 1);
const heldOut: Example[] = Array.from({ length: HELD_OUT_SIZE }, () => randomExample(heldOutRand, 1, maxLen));
const heldOutKeys = new Set(heldOut.map(keyOf));

let weights: Weights;
let training: Record<string, unknown> = {};
if (args['export-only']) {
  weights = args['from-onnx'] ? await loadOnnxWeights(path.resolve(args['from-onnx'])) : await loadCheckpoint(checkpointDir);
  training = JSON.parse(await readFile(path.join(outDir, 'model-card.json'), 'utf8')).training;
} else {
  weights = args.resume ? await loadCheckpoint(checkpointDir) : initWeights(seed);
  const previous = args.resume ? (JSON.parse(await readFile(path.join(outDir, 'model-card.json'), 'utf8')).training as PreviousTraining) : undefined;
  training = await train(weights, previous);
  await saveCheckpoint(weights, checkpointDir);
}
const model = new TfTransformer(weights);
const evaluation = args['export-only'] ? training.evaluation : await evaluate(model, heldOut);
await exportModel(weights, { ...training, evaluation }, await keepExisting(evaluation));

/**
 * A short or unlucky run must not replace a better model already in --out (the committed one by
 * default): unless --force, a run whose held-out exact match is lower writes to the checkpoint folder.
 */
async function keepExisting(evaluation: unknown): Promise<boolean> {
  if (args.force || args['export-only']) return false;
  const accuracy = (e: unknown) => (e as { exactMatchAccuracy?: number } | undefined)?.exactMatchAccuracy ?? -1;
  let existing: unknown;
  try {
    existing = JSON.parse(await readFile(path.join(outDir, 'model-card.json'), 'utf8')).training?.evaluation;
  } catch {
    return false;
  }
  return accuracy(evaluation) < accuracy(existing);
}

interface PreviousTraining {
  steps: number;
  seconds: number;
  learningRate: number;
  runs?: Array<{ steps: number; learningRate: number; seconds: number }>;
}

async function train(weights: Weights, previous?: PreviousTraining): Promise<Record<string, unknown>> {
  const model = new TfTransformer(weights);
  const optimizer = tf.train.adam(baseLr, 0.9, 0.98, 1e-9);
  // A resumed run continues the step count and the loss log, on a fresh data stream.
  const stepOffset = previous?.steps ?? 0;
  const secondsOffset = previous?.seconds ?? 0;
  const rand = mulberry32(seed + stepOffset);
  // The log grows beside the checkpoint and is copied next to the model it belongs to on export, so a
  // run that does not replace the model in --out leaves that model's log alone too.
  const logPath = path.join(checkpointDir, 'training-log.csv');
  if (previous) await copyFile(path.join(outDir, 'training-log.csv'), logPath);
  else await TrainingProgress.newLog(logPath);
  const progress = new TrainingProgress('training', maxSteps, logPath, { steps: stepOffset, seconds: secondsOffset });
  const warmup = 100;
  while (progress.step < maxSteps && progress.seconds * 1000 < budgetMs) {
    // One length per batch: no padding, so no compute spent on PAD positions.
    const length = 1 + Math.floor(rand() * maxLen);
    const examples: Example[] = [];
    while (examples.length < batchSize) {
      const e = randomExampleOfLength(rand, length);
      if (!heldOutKeys.has(keyOf(e))) examples.push(e);
    }
    const batch = makeBatch(task, examples);
    (optimizer as unknown as { learningRate: number }).learningRate = scheduledLearningRate(baseLr, progress.step, warmup);
    await progress.record(...trainStep(model, optimizer, batch));
    // Stop early once the task is solved on the training stream (the held-out check follows).
    if (progress.step > 300 && progress.recentAccuracy > 0.999) break;
  }
  progress.stop();
  const { step, lastLoss, recentAccuracy } = progress;
  const seconds = Math.round(progress.seconds);
  return {
    task,
    steps: stepOffset + step,
    batchSize,
    maxContentTokens: maxLen,
    learningRate: baseLr,
    seed,
    seconds: secondsOffset + seconds,
    finalLoss: lastLoss,
    finalTokenAccuracy: recentAccuracy,
    backend: tf.getBackend(),
    // Each run of the script (a resumed run continues the weights with a fresh optimizer).
    runs: [
      ...(previous ? (previous.runs ?? [{ steps: previous.steps, learningRate: previous.learningRate, seconds: previous.seconds }]) : []),
      { steps: step, learningRate: baseLr, seconds },
    ],
  };
}

/** Greedy decoding of every held-out prompt; exact match = the whole answer and the EOS right after it. */
async function evaluate(model: TfTransformer, examples: Example[]): Promise<Record<string, unknown>> {
  const batch = makeBatch(task, examples);
  const steps = batch.targetLen;
  const generated = tf.tidy(() => {
    const source = tf.tensor2d(batch.source, [batch.size, batch.sourceLen], 'int32');
    const memory = model.encode(source);
    let prefix = tf.fill([batch.size, 1], SPECIAL_TOKENS.BOS, 'int32') as tf.Tensor2D;
    for (let s = 0; s < steps; s++) {
      const logits = model.decode(memory, source, prefix);
      const last = logits.slice([0, s, 0], [batch.size, 1, MODEL_DIMS.vocabSize]).reshape([batch.size, MODEL_DIMS.vocabSize]);
      prefix = tf.concat([prefix, tf.argMax(last, -1).toInt().reshape([batch.size, 1])], 1) as tf.Tensor2D;
    }
    return prefix;
  });
  const out = await generated.array();
  generated.dispose();
  let exact = 0;
  let tokensRight = 0;
  let tokensTotal = 0;
  examples.forEach((e, b) => {
    const want = [...expectedAnswer(task, e.content), SPECIAL_TOKENS.EOS];
    const got = out[b]!.slice(1, 1 + want.length);
    if (want.every((id, i) => got[i] === id)) exact++;
    want.forEach((id, i) => {
      tokensTotal++;
      if (got[i] === id) tokensRight++;
    });
  });
  const result = {
    heldOutPrompts: examples.length,
    exactMatchAccuracy: exact / examples.length,
    tokenAccuracy: tokensRight / tokensTotal,
    // Guessing uniformly among the 990 content tokens gets a whole answer right with probability < 1/990.
    chanceExactMatch: `< ${(1 / 990).toExponential(2)}`,
  };
  console.log(
    `held-out: exact match ${(result.exactMatchAccuracy * 100).toFixed(1)}% over ${examples.length} prompts, token accuracy ` +
      `${(result.tokenAccuracy * 100).toFixed(1)}%`,
  );
  return result;
}

async function exportModel(weights: Weights, trainingReport: Record<string, unknown>, keep: boolean): Promise<void> {
  const arrays = await toArrays(weights);
  const target = keep ? path.join(checkpointDir, 'model') : outDir;
  if (keep) {
    console.log(`the model in ${outDir} scores higher on the held-out set: kept it; this run goes to ${target} (--force overwrites)`);
    await mkdir(target, { recursive: true });
  }
  await writeFile(path.join(target, 'encoder.onnx'), exportEncoder(arrays));
  await writeFile(path.join(target, 'decoder.onnx'), exportDecoder(arrays));
  const card = {
    name: 'strata-tiny',
    architecture: 'encoder-decoder transformer, pre-LayerNorm, sinusoidal positions, tied input/output embeddings, ReLU feed-forward',
    dims: MODEL_DIMS,
    parameters: [...arrays.values()].reduce((n, w) => n + w.data.length, 0),
    specialTokens: SPECIAL_TOKENS,
    contentTokens: '10..999',
    promptFormat: 'for each message: role token, then its words as ids (integers 10..999 are ids, other words are hashed); then EOS',
    task: `${task}: the answer to one user message of content ids is those ids ${task === 'copy' ? 'in the same order' : 'reversed'}`,
    files: { encoder: 'encoder.onnx', decoder: 'decoder.onnx', lossLog: 'training-log.csv' },
    training: trainingReport,
  };
  if (!args['export-only']) await copyFile(path.join(checkpointDir, 'training-log.csv'), path.join(target, 'training-log.csv'));
  await writeFile(path.join(target, 'model-card.json'), JSON.stringify(card, null, 2) + '\n');
  console.log(`wrote ${target}/encoder.onnx, decoder.onnx, model-card.json`);
}

async function loadOnnxWeights(dir: string): Promise<Weights> {
  const arrays = await weightsFromOnnx(dir, weightShapes());
  return new Map([...arrays].map(([name, w]) => [name, tf.variable(tf.tensor(w.data, w.shape), true, name)]));
}
