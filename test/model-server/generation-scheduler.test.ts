import { expect } from 'chai';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/app.js';
import { GenerationScheduler, type SequenceRequest } from '../../images/model-server/src/generation-scheduler.js';
import { SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { OnnxTransformer } from '../../images/model-server/src/onnx-transformer.js';
import { TokenSampler } from '../../images/model-server/src/token-sampler.js';

/**
 * A greedy sequence that copies `length` content ids (so it generates `length` tokens), recording
 * `start NAME` and `token NAME` in `events`; `finished` settles when it is done.
 */
function recorded(events: string[], name: string, length: number, onFirstToken?: () => void): { request: SequenceRequest; finished: Promise<void> } {
  let first = true;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const request: SequenceRequest = {
    prompt: [SPECIAL_TOKENS.USER, ...Array.from({ length }, (_, i) => 10 + i), SPECIAL_TOKENS.EOS],
    maxTokens: length,
    sampler: new TokenSampler({ temperature: 0, topP: 1 }),
    onStart: () => events.push(`start ${name}`),
    onToken: () => {
      events.push(`token ${name}`);
      if (first) onFirstToken?.();
      first = false;
      return false;
    },
    onFinish: () => done(),
    onError: (err) => {
      throw err;
    },
  };
  return { request, finished };
}

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
    const wave = (names: string[]) =>
      names.map((name) => {
        const s = recorded(events, name, 3);
        scheduler.enqueue([s.request]);
        return s.finished;
      });
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

  it('while a batch decodes, prompts join in waves: a smaller group waits one step, a full wave joins at once', async () => {
    /** Runs `a` (8 tokens); on its first token, `arrivals` sequences are enqueued. Returns the events. */
    const run = async (admissionWave: number, arrivals: number, maxBatch = 8) => {
      const scheduler = new GenerationScheduler(model, { maxBatch, batchWindowMs: 0, maxQueue: 10, admissionWave });
      const events: string[] = [];
      const finished: Array<Promise<void>> = [];
      const a = recorded(events, 'a', 8, () => {
        for (let i = 1; i <= arrivals; i++) {
          const b = recorded(events, `b${i}`, 8);
          finished.push(b.finished);
          scheduler.enqueue([b.request]);
        }
      });
      scheduler.enqueue([a.request]);
      await a.finished;
      await Promise.all(finished);
      scheduler.close();
      return events;
    };
    // A lone arrival waits one step for others, then joins anyway.
    expect((await run(3, 1)).slice(0, 5)).to.deep.equal(['start a', 'token a', 'token a', 'start b1', 'token a']);
    // A whole wave joins at the next step.
    expect((await run(3, 3)).slice(0, 6)).to.deep.equal(['start a', 'token a', 'start b1', 'start b2', 'start b3', 'token a']);
    // A whole wave waits, but only two fit beside `a`: they wait one step too (their encoder run then
    // takes the ones that fit a step later as well), and the third joins when a slot frees.
    const crowded = await run(3, 3, 3);
    expect(crowded.slice(0, 6)).to.deep.equal(['start a', 'token a', 'token a', 'start b1', 'start b2', 'token a']);
    expect(crowded.filter((e) => e === 'token b3')).to.have.length(8);
    // admissionWave 1: every arrival joins at the next step.
    expect((await run(1, 1)).slice(0, 4)).to.deep.equal(['start a', 'token a', 'start b1', 'token a']);
    // Every deferred sequence is still generated to the end.
    const events = await run(3, 2);
    for (const name of ['b1', 'b2']) expect(events.filter((e) => e === `token ${name}`)).to.have.length(8);
  });

  it('beforeAdmit runs before every admission, and what it enqueues joins the batch at the very next step', async () => {
    let calls = 0;
    let late: Promise<void> | undefined;
    const events: string[] = [];
    const scheduler = new GenerationScheduler(model, {
      maxBatch: 8,
      batchWindowMs: 0,
      maxQueue: 10,
      admissionWave: 1,
      // The second admission happens right after the first decoder step, without an event-loop turn:
      // a request handed over here (as the worker thread drains its port) must not wait another step.
      beforeAdmit: () => {
        if (++calls !== 2) return;
        const b = recorded(events, 'b', 3);
        late = b.finished;
        scheduler.enqueue([b.request]);
      },
    });
    const a = recorded(events, 'a', 4);
    scheduler.enqueue([a.request]);
    await a.finished;
    await late;
    expect(calls).to.be.greaterThanOrEqual(2);
    expect(events.slice(0, 4)).to.deep.equal(['start a', 'token a', 'start b', 'token a']);
    expect(events.filter((e) => e === 'token b')).to.have.length(3);
    scheduler.close();
  });
});
