/**
 * `npm run train-model` (or `-- --model strata-verse`): trains strata-verse, the same transformer as
 * strata-tiny, to answer the poem app's requests with verse. The corpus is the songs and poems file of
 * Debian's `fortunes` package (`apt-get install fortunes`, BSD licence). Steps:
 *   1. learn a 990-piece BPE tokenizer on the corpus (content ids 10..999; the special ids as strata-tiny's);
 *   2. cut stanzas into examples (answer = up to 32 tokens of whole lines; prompt = the poem app's own
 *      request on a theme word from the answer: its user message, the only one this model reads), hold
 *      out 5 % of the stanzas;
 *   3. train with tfjs (wasm backend) with a progress bar, then report the held-out loss and perplexity
 *      beside a unigram baseline's, and write images/model-server/model/strata-verse/{encoder.onnx,
 *      decoder.onnx, tokenizer.json, model-card.json, training-log.csv, generation_config.json (the
 *      sampling the server uses when a request leaves it out), corpus-words.txt (the corpus's words)}.
 * Everything random comes from --seed: the same seed and options give the same model.
 *
 * Options: --steps N (default 4000)  --seconds N (a safety cap, default 7200: a run it cuts short is not
 *          reproducible, and says so)  --batch N (default 16)  --warmup N (default 100)
 *          --lr X (peak learning rate, default 0.003; cosine decay to 5 % of it at --steps)  --seed N (default 7)
 *          --dropout X (on the embeddings and every sublayer's output while training, default 0.15: the
 *          corpus is small, and without it the held-out loss turns upward after about five epochs)
 *          --eval-every N (held-out loss every N steps, into the card's curve; default 250)
 *          --corpus FILE  --out DIR  --checkpoint DIR (raw weights, default data/train-verse)
 *          --resume (continue the weights in --checkpoint, whose model and card are in --out, for
 *          --steps more with a fresh optimizer and schedule; the card lists each run)
 */
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { BpeTokenizer, trainBpe, type BpeTokenizerFile } from '../../images/model-server/src/bpe-tokenizer.js';
import { CONTENT_TOKEN_COUNT, MAX_PROMPT_TOKENS, MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { GENERATION_CONFIG_FILE } from '../../images/model-server/src/served-models.js';
import { mulberry32 } from '../../images/service-kit/src/random.js';
import { exportDecoder, exportEncoder } from './export-onnx.js';
import { TrainingProgress, cosineLearningRate, evaluateLoss, loadCheckpoint, saveCheckpoint, toArrays, trainStep } from './training-step.js';
import { TfTransformer, initWeights } from './transformer-tf.js';
import {
  DEFAULT_CORPUS,
  MAX_ANSWER_TOKENS,
  corpusWordList,
  makeExamples,
  makeVerseBatch,
  readStanzas,
  unigramLoss,
  type VerseExample,
} from './verse-corpus.js';

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'strata-verse' },
    seconds: { type: 'string', default: '7200' },
    steps: { type: 'string', default: '4000' },
    warmup: { type: 'string', default: '100' },
    'eval-every': { type: 'string', default: '250' },
    batch: { type: 'string', default: '16' },
    lr: { type: 'string', default: '0.003' },
    dropout: { type: 'string', default: '0.15' },
    seed: { type: 'string', default: '7' },
    corpus: { type: 'string', default: DEFAULT_CORPUS },
    out: { type: 'string', default: 'images/model-server/model/strata-verse' },
    checkpoint: { type: 'string', default: 'data/train-verse' },
    resume: { type: 'boolean', default: false },
  },
});
const seed = Number(args.seed);
const maxSteps = Number(args.steps);
const budgetMs = Number(args.seconds) * 1000;
const batchSize = Number(args.batch);
const baseLr = Number(args.lr);
const dropoutRate = Number(args.dropout);
const outDir = path.resolve(args.out);
const checkpointDir = path.resolve(args.checkpoint);
const warmup = Number(args.warmup);
const evalEvery = Number(args['eval-every']);
const HELD_OUT_SHARE = 0.05;
/**
 * The sampling this model reads best with (real words, whole lines): a lower temperature and a
 * nucleus cut keep it off the rare pieces that, drawn at temperature 1, spell non-words.
 */
const GENERATION_CONFIG = { temperature: 0.7, top_p: 0.7 };

await tf.setBackend('wasm');
await tf.ready();
await mkdir(outDir, { recursive: true });
await mkdir(checkpointDir, { recursive: true });

const stanzas = await readStanzas(args.corpus);
const tokenizerFile: BpeTokenizerFile = { ...trainBpe(stanzas.join('\n\n')), prompt: 'last-user' };
const tokenizer = new BpeTokenizer(tokenizerFile);
const rand = mulberry32(seed);
// Held-out stanzas are chosen before any example is made, so no line of them is ever trained on.
const shuffled = shuffle([...stanzas], rand);
const heldOutCount = Math.max(1, Math.round(shuffled.length * HELD_OUT_SHARE));
const heldOut = makeExamples(shuffled.slice(0, heldOutCount), tokenizer, rand);
const trainSet = makeExamples(shuffled.slice(heldOutCount), tokenizer, rand);
console.log(
  `corpus: ${stanzas.length} stanzas from ${args.corpus}; tokenizer: ${tokenizerFile.pieces.length} pieces; ` +
    `${trainSet.length} training and ${heldOut.length} held-out examples (${trainSet.reduce((n, e) => n + e.answer.length, 0)} answer tokens)`,
);

/** What a resumed run continues: the training section of the card in --out. */
interface PreviousTraining {
  steps: number;
  seconds: number;
  heldOutCurve: Array<{ step: number; loss: number }>;
  evaluation: { heldOutLoss: number };
  runs?: Array<Record<string, unknown>>;
  [key: string]: unknown;
}
const previous = args.resume ? (JSON.parse(await readFile(path.join(outDir, 'model-card.json'), 'utf8')).training as PreviousTraining) : undefined;
const weights = previous ? await loadCheckpoint(checkpointDir) : initWeights(seed);
const model = new TfTransformer(weights, dropoutRate, seed);
const heldOutBatches = chunks(heldOut, batchSize).map(makeVerseBatch);
const training = await train();
await saveCheckpoint(weights, checkpointDir);
const heldOutLoss = await evaluateLoss(model, heldOutBatches);
const baselineLoss = unigramLoss(trainSet, heldOut, CONTENT_TOKEN_COUNT + 1);
const evaluation = {
  heldOutExamples: heldOut.length,
  heldOutLoss: round(heldOutLoss),
  heldOutPerplexity: round(Math.exp(heldOutLoss)),
  unigramBaselineLoss: round(baselineLoss),
  unigramBaselinePerplexity: round(Math.exp(baselineLoss)),
};
console.log(
  `held-out: loss ${evaluation.heldOutLoss} nats/token, perplexity ${evaluation.heldOutPerplexity}; ` +
    `unigram baseline: loss ${evaluation.unigramBaselineLoss}, perplexity ${evaluation.unigramBaselinePerplexity}`,
);
await exportModel({ ...training, evaluation });

async function train(): Promise<Record<string, unknown>> {
  const optimizer = tf.train.adam(baseLr, 0.9, 0.98, 1e-9);
  const logPath = path.join(checkpointDir, 'training-log.csv');
  // A resumed run continues the step count, the loss log and the held-out curve.
  const offset = { steps: previous?.steps ?? 0, seconds: previous?.seconds ?? 0 };
  if (previous) await copyFile(path.join(outDir, 'training-log.csv'), logPath);
  else await TrainingProgress.newLog(logPath);
  const progress = new TrainingProgress('training strata-verse', maxSteps, logPath, offset);
  let order: VerseExample[] = [];
  // The held-out loss along the way (no gradient, no randomness: the run is the same with or without it).
  const heldOutCurve: Array<{ step: number; loss: number }> = previous
    ? [...previous.heldOutCurve, { step: previous.steps, loss: previous.evaluation.heldOutLoss }]
    : [];
  while (progress.step < maxSteps && progress.seconds * 1000 < budgetMs) {
    if (order.length < batchSize) order = shuffle([...trainSet], rand);
    const batch = makeVerseBatch(order.splice(0, batchSize));
    (optimizer as unknown as { learningRate: number }).learningRate = cosineLearningRate(baseLr, progress.step, warmup, maxSteps);
    await progress.record(...trainStep(model, optimizer, batch));
    if (progress.step % evalEvery === 0 && progress.step < maxSteps) {
      heldOutCurve.push({ step: offset.steps + progress.step, loss: round(await evaluateLoss(model, heldOutBatches)) });
      console.log(`\nstep ${progress.step}: held-out loss ${heldOutCurve.at(-1)!.loss}`);
    }
  }
  progress.stop();
  const { step, lastLoss } = progress;
  const seconds = Math.round(progress.seconds);
  const cutShort = step < maxSteps;
  if (cutShort)
    console.warn(
      `the time budget (--seconds ${args.seconds}) ended training before --steps ${maxSteps}: this model depends on the machine's speed, not only on the seed`,
    );
  const run = {
    steps: step,
    ...(cutShort ? { cutShortByTimeBudget: true } : {}),
    learningRate: baseLr,
    warmupSteps: warmup,
    dropout: dropoutRate,
    seconds,
    ...(previous ? { resumed: true } : {}),
  };
  const earlier = previous
    ? (previous.runs ?? [{ steps: previous.steps, learningRate: previous.learningRate, warmupSteps: previous.warmupSteps, seconds: previous.seconds }])
    : [];
  return {
    steps: offset.steps + step,
    batchSize,
    learningRate: baseLr,
    schedule: 'linear warm-up, cosine decay to 5 % (each run)',
    dropout: dropoutRate,
    warmupSteps: warmup,
    seed,
    seconds: offset.seconds + seconds,
    finalLoss: round(lastLoss),
    heldOutCurve,
    runs: [...earlier, run],
    backend: tf.getBackend(),
  };
}

async function exportModel(trainingReport: Record<string, unknown>): Promise<void> {
  const arrays = await toArrays(weights);
  await writeFile(path.join(outDir, 'encoder.onnx'), exportEncoder(arrays));
  await writeFile(path.join(outDir, 'decoder.onnx'), exportDecoder(arrays));
  await writeFile(path.join(outDir, 'tokenizer.json'), JSON.stringify(tokenizerFile) + '\n');
  await copyFile(path.join(checkpointDir, 'training-log.csv'), path.join(outDir, 'training-log.csv'));
  await writeFile(path.join(outDir, GENERATION_CONFIG_FILE), JSON.stringify(GENERATION_CONFIG, null, 2) + '\n');
  await writeFile(path.join(outDir, 'corpus-words.txt'), corpusWordList(stanzas));
  const card = {
    name: 'strata-verse',
    architecture: 'encoder-decoder transformer, pre-LayerNorm, sinusoidal positions, tied input/output embeddings, ReLU feed-forward (as strata-tiny)',
    dims: MODEL_DIMS,
    parameters: [...arrays.values()].reduce((n, w) => n + w.data.length, 0),
    specialTokens: SPECIAL_TOKENS,
    tokenizer:
      `BPE over characters, ${tokenizerFile.pieces.length} pieces (content ids 10..${9 + tokenizerFile.pieces.length}), ` +
      `${tokenizerFile.merges.length} merges: tokenizer.json`,
    promptFormat: `the last user message only: USER token, its text's BPE ids, EOS (at most ${MAX_PROMPT_TOKENS} tokens); trained on the poem app's requests`,
    task: `verse: an answer of at most ${MAX_ANSWER_TOKENS} tokens of whole lines of a stanza`,
    corpus: { file: args.corpus, package: 'fortunes (Debian)', licence: 'BSD (see /usr/share/doc/fortunes/copyright)', stanzas: stanzas.length },
    files: {
      encoder: 'encoder.onnx',
      decoder: 'decoder.onnx',
      tokenizer: 'tokenizer.json',
      lossLog: 'training-log.csv',
      sampling: GENERATION_CONFIG_FILE,
      corpusWords: 'corpus-words.txt',
    },
    training: trainingReport,
  };
  await writeFile(path.join(outDir, 'model-card.json'), JSON.stringify(card, null, 2) + '\n');
  console.log(`wrote ${outDir}/encoder.onnx, decoder.onnx, tokenizer.json, model-card.json`);
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
