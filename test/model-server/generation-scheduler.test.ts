import { expect } from 'chai';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/app.js';
import { GenerationScheduler, type SequenceRequest } from '../../images/model-server/src/generation-scheduler.js';
import { SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { OnnxTransformer } from '../../images/model-server/src/onnx-transformer.js';
import { TokenSampler } from '../../images/model-server/src/token-sampler.js';

describe('model-server generation scheduler', () => {
  let model: OnnxTransformer;
  before(async () => {
    model = await OnnxTransformer.load(DEFAULT_MODEL_DIR);
  });
  after(async () => model.release());

  it('after concurrent traffic, an idle scheduler waits for the next wave and starts it as soon as it is complete (not at the end of the window)', async () => {
    // A window far longer than the test's timeout: only the early start can finish the second wave.
    const scheduler = new GenerationScheduler(model, { maxBatch: 32, batchWindowMs: 600_000, maxQueue: 100 });
    const events: string[] = [];
    const sequence = (name: string, done: () => void): SequenceRequest => ({
      prompt: [SPECIAL_TOKENS.USER, 10, 11, 12, SPECIAL_TOKENS.EOS],
      maxTokens: 3,
      sampler: new TokenSampler({ temperature: 0, topP: 1 }),
      onStart: () => events.push(`start ${name}`),
      onToken: () => {
        events.push(`token ${name}`);
        return false;
      },
      onFinish: done,
      onError: (err) => {
        throw err;
      },
    });
    const wave = (names: string[]) => names.map((name) => new Promise<void>((resolve) => scheduler.enqueue([sequence(name, resolve)])));
    // First wave: four sequences together (no earlier traffic, so no window).
    await Promise.all(wave(['a1', 'a2', 'a3', 'a4']));
    events.length = 0;
    // Second wave: one sequence, then the other three a moment later.
    const first = wave(['b1']);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.all([...first, ...wave(['b2', 'b3', 'b4'])]);
    const firstToken = events.findIndex((e) => e.startsWith('token'));
    expect(events.slice(0, firstToken)).to.have.members(['start b1', 'start b2', 'start b3', 'start b4']);
    scheduler.close();
  });
});
