import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { expectedAnswer, mulberry32, randomExample, type Task } from '../../hack/train/dataset.js';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/app.js';
import { GenerationScheduler, type FinishReason } from '../../images/model-server/src/generation-scheduler.js';
import { MODEL_DIMS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { OnnxTransformer } from '../../images/model-server/src/onnx-transformer.js';
import { TokenSampler } from '../../images/model-server/src/token-sampler.js';
import { encodeChat } from '../../images/model-server/src/tokenizer.js';

interface ModelCard {
  dims: typeof MODEL_DIMS;
  specialTokens: typeof SPECIAL_TOKENS;
  training: {
    task: Task;
    seed: number;
    maxContentTokens: number;
    evaluation: { heldOutPrompts: number; exactMatchAccuracy: number; tokenAccuracy: number };
  };
}

/** A whole answer right by guessing among the 990 content tokens: below 1/990 even for one-token answers. */
const CHANCE_EXACT_MATCH = 1 / 990;

describe('model-server: the committed trained model', () => {
  let card: ModelCard;

  before(async () => {
    card = JSON.parse(await readFile(path.join(DEFAULT_MODEL_DIR, 'model-card.json'), 'utf8')) as ModelCard;
  });

  it('has the shape and special tokens the server uses, and a training report far above chance', () => {
    expect(card.dims).to.deep.equal(MODEL_DIMS);
    expect(card.specialTokens).to.deep.equal(SPECIAL_TOKENS);
    const evaluation = card.training.evaluation;
    expect(evaluation.heldOutPrompts).to.be.at.least(100);
    expect(evaluation.exactMatchAccuracy).to.be.at.least(0.9);
    expect(evaluation.exactMatchAccuracy).to.be.greaterThan(100 * CHANCE_EXACT_MATCH);
  });

  it('its loss log shows the loss falling from chance level to near zero', async () => {
    const rows = (await readFile(path.join(DEFAULT_MODEL_DIR, 'training-log.csv'), 'utf8')).trim().split('\n');
    expect(rows[0]).to.equal('step,loss,token_accuracy,elapsed_s');
    const losses = rows.slice(1).map((r) => Number(r.split(',')[1]));
    expect(losses.length).to.be.at.least(100);
    expect(losses.every(Number.isFinite)).to.equal(true);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    // Uniform guessing over 1000 ids is ln(1000) ≈ 6.9 nats.
    expect(mean(losses.slice(0, 10))).to.be.greaterThan(6);
    expect(mean(losses.slice(-50))).to.be.below(0.1);
  });

  it("copies the training script's own held-out prompts (never trained on) through the served ONNX graphs", async () => {
    // The same held-out set train-model.ts builds and excludes from training (its seed and length).
    const { seed, maxContentTokens, task } = card.training;
    const rand = mulberry32(seed * 7919 + 1);
    const heldOut = Array.from({ length: 160 }, () => randomExample(rand, 1, maxContentTokens).content);
    const model = await OnnxTransformer.load(DEFAULT_MODEL_DIR);
    try {
      const scheduler = new GenerationScheduler(model, { maxBatch: 32, batchWindowMs: 0, maxQueue: 1000 });
      const answers = await Promise.all(
        heldOut.map(
          (content) =>
            new Promise<{ ids: number[]; reason: FinishReason }>((resolve, reject) => {
              const ids: number[] = [];
              scheduler.enqueue([
                {
                  prompt: encodeChat([{ role: 'user', content: content.join(' ') }]),
                  maxTokens: 64,
                  sampler: new TokenSampler({ temperature: 0, topP: 1 }),
                  onToken: (id) => {
                    ids.push(id);
                    return false;
                  },
                  onFinish: (reason) => resolve({ ids, reason }),
                  onError: reject,
                },
              ]);
            }),
        ),
      );
      // Exact match: the whole expected answer, then EOS (finish_reason "stop").
      const exact = answers.filter((a, i) => a.reason === 'stop' && a.ids.join(' ') === expectedAnswer(task, heldOut[i]!).join(' ')).length;
      const accuracy = exact / heldOut.length;
      expect(accuracy, `held-out exact match ${accuracy}`).to.be.at.least(0.85);
      expect(accuracy).to.be.greaterThan(100 * CHANCE_EXACT_MATCH);
    } finally {
      await model.release();
    }
  });
});
