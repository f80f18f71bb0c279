/**
 * The generation engine in a worker thread: the ONNX sessions and the GenerationScheduler's decode
 * loop run here, so that decoding does not compete with HTTP parsing, validation and SSE writes on
 * the main thread's event loop (ONNX Runtime's `run` blocks the thread it is called on).
 * The HTTP thread (`worker-engine.ts`) sends sequences and cancellations; this thread answers with
 * one `events` message per decoder step (tokens, finishes, metrics observations).
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import type { EngineEvents, EngineWorkerData, FromWorker, ToWorker } from './engine-protocol.js';
import { GenerationScheduler, type SequenceHandle } from './generation-scheduler.js';
import { OnnxTransformer } from './onnx-transformer.js';
import { TokenSampler } from './token-sampler.js';

const port = parentPort!;
const config = workerData as EngineWorkerData;
const post = (message: FromWorker) => port.postMessage(message);

let provider: 'cpu' | 'cuda' = config.executionProvider ?? 'cpu';
// No top-level await: the bootstrap loads this module through tsx's CommonJS hook.
void OnnxTransformer.loadWithFallback(config.modelDir, { threads: config.threads, executionProvider: config.executionProvider }, (err) => {
  provider = 'cpu';
  post({ t: 'warn', message: `CUDA execution provider unavailable, using the CPU: ${err instanceof Error ? err.message : String(err)}` });
}).then(serve, (err: unknown) => {
  post({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
  port.close(); // nothing else keeps this thread alive: it exits
});

function serve(model: OnnxTransformer): void {
  const emptyEvents = () => ({
    admitted: [] as number[],
    tokens: [] as number[],
    logprobs: [] as number[],
    finished: [] as number[],
    errors: [] as EngineEvents['errors'],
    steps: [] as number[],
    firstTokens: [] as number[],
    nextTokens: [] as number[],
  });
  let pending = emptyEvents();
  let flushQueued = false;
  /** Everything a decoder step produces is reported in one message, sent once the step's callbacks have run. */
  const queueFlush = () => {
    if (flushQueued) return;
    flushQueued = true;
    queueMicrotask(() => {
      flushQueued = false;
      const e = pending;
      pending = emptyEvents();
      // Every list is a view of one buffer, transferred rather than cloned: one block of memory per step.
      const lists = [e.admitted, e.tokens, e.logprobs, e.finished, e.steps, e.firstTokens, e.nextTokens];
      const data = new Float64Array(lists.reduce((n, a) => n + a.length, 0));
      let at = 0;
      const [admitted, tokens, logprobs, finished, steps, firstTokens, nextTokens] = lists.map((a) => {
        data.set(a, at);
        at += a.length;
        return data.subarray(at - a.length, at);
      });
      port.postMessage({ t: 'events', admitted, tokens, logprobs, finished, errors: e.errors, steps, firstTokens, nextTokens } satisfies FromWorker, [
        data.buffer,
      ]);
    });
  };

  const scheduler = new GenerationScheduler(
    model,
    // The HTTP thread bounds the queue (it answers 429); this one takes whatever it is sent.
    {
      maxBatch: config.maxBatch,
      batchWindowMs: config.batchWindowMs,
      admissionWave: config.admissionWave,
      maxQueue: Number.POSITIVE_INFINITY,
      // Requests that reached this thread during the last decoder run join the batch at this step.
      beforeAdmit: () => {
        for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
          for (const message of m.message as ToWorker[]) handle(message);
        }
      },
    },
    {
      queueChanged: () => {},
      // Metrics observations travel with the next message (a finish, an admission or a streamed token):
      // a step that only produced tokens nobody waits for does not wake the HTTP thread.
      stepped: (batchSize, seconds) => pending.steps.push(batchSize, seconds),
      firstToken: (seconds) => pending.firstTokens.push(seconds),
      nextToken: (seconds) => pending.nextTokens.push(seconds),
    },
  );

  const handles = new Map<number, SequenceHandle>();
  port.on('message', (messages: ToWorker[]) => {
    for (const message of messages) handle(message);
  });

  function handle(message: ToWorker): void {
    if (message.t === 'cancel') {
      for (const id of message.ids) {
        handles.get(id)?.cancel();
        handles.delete(id);
      }
      return;
    }
    const { prompt, seqs } = message;
    const done = (id: number) => {
      handles.delete(id);
      queueFlush();
    };
    try {
      const created = scheduler.enqueue(
        seqs.map((s) => ({
          prompt,
          maxTokens: s.maxTokens,
          sampler: new TokenSampler({
            temperature: s.temperature,
            topP: s.topP,
            seed: s.seed,
            presencePenalty: s.presencePenalty,
            frequencyPenalty: s.frequencyPenalty,
          }),
          // Reported with the step that follows the admission (or with the error of a failed encode).
          onStart: () => {
            pending.admitted.push(s.id);
            queueFlush();
          },
          // The HTTP thread matches stop strings and cancels the sequence when one matches.
          topLogprobs: s.topLogprobs,
          onToken: (token, logprobs) => {
            pending.tokens.push(s.id, token);
            if (logprobs) pending.logprobs.push(s.id, logprobs.logprob, logprobs.top.length / 2, ...logprobs.top);
            if (s.streamed) queueFlush();
            return false;
          },
          onFinish: (reason) => {
            pending.finished.push(s.id, reason === 'stop' ? 0 : 1);
            done(s.id);
          },
          onError: (err) => {
            pending.errors.push([s.id, err.message]);
            done(s.id);
          },
        })),
      );
      seqs.forEach((s, i) => handles.set(s.id, created[i]!));
    } catch (err) {
      for (const s of seqs) pending.errors.push([s.id, err instanceof Error ? err.message : String(err)]);
      queueFlush();
    }
  }

  post({ t: 'ready', executionProvider: provider });
}
