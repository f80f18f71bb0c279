import { Worker } from 'node:worker_threads';
import type { Logger } from '../../service-kit/src/logger.js';
import type { EngineEvents, EngineSettings, EngineWorkerData, FromWorker, SequenceSpec, ToWorker } from './engine-protocol.js';
import {
  EngineUnavailableError,
  QueueFullError,
  type SchedulerObserver,
  type SequenceHandle,
  type SequenceQueue,
  type SequenceRequest,
} from './generation-scheduler.js';
import type { TokenLogprobs } from './token-sampler.js';

const BOOTSTRAP = new URL('./engine-worker-bootstrap.mjs', import.meta.url);
// The worker module in this module's own form: .ts where tsx runs the sources, .js in the images (compiled).
const ENGINE_WORKER = import.meta.url.endsWith('.ts') ? new URL('./engine-worker.ts', import.meta.url) : new URL('./engine-worker.js', import.meta.url);

export interface WorkerEngineOptions extends EngineSettings {
  /** Most sequences waiting for a batch slot (bounded here, in the HTTP thread); beyond it enqueue() throws QueueFullError. */
  maxQueue: number;
  logger: Logger;
  observer?: SchedulerObserver;
  /** First delay before restarting a worker that died (doubles up to 30 s while restarts keep failing). Default 200 ms. */
  restartDelayMs?: number;
  /** The worker module (tests use a stand-in); default engine-worker beside this module. */
  workerEntry?: URL;
}

interface Sequence {
  request: SequenceRequest;
  /** Still in the queue (not yet admitted to the running batch). */
  waiting: boolean;
}

/**
 * The generation engine (ONNX sessions + GenerationScheduler) in a worker thread, seen from the HTTP
 * thread as a SequenceQueue. This side keeps the bounded queue's accounting (429), maps sequences to
 * their callbacks, matches stop strings (through the request's onToken) and feeds the metrics; the
 * worker decodes and reports each step's tokens in one message.
 *
 * If the worker dies, every sequence in flight fails with EngineUnavailableError (503), `ready` is
 * false (so /readyz and new requests answer 503) and a new worker is started.
 */
export class WorkerEngine implements SequenceQueue {
  private worker: Worker | undefined;
  private isReady = false;
  private closed = false;
  private nextId = 1;
  private readonly sequences = new Map<number, Sequence>();
  private waitingCount = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartDelay: number;
  /** Workers started so far (the first one included). */
  starts = 0;

  private constructor(private readonly opts: WorkerEngineOptions) {
    this.restartDelay = opts.restartDelayMs ?? 200;
  }

  /** Start the worker and load the model in it; rejects when the model cannot be loaded. */
  static async start(opts: WorkerEngineOptions): Promise<WorkerEngine> {
    const engine = new WorkerEngine(opts);
    try {
      await engine.spawn();
    } catch (err) {
      await engine.close();
      throw err;
    }
    return engine;
  }

  /** A worker with the model loaded is there to take sequences. */
  get ready(): boolean {
    return this.isReady;
  }

  get queueDepth(): number {
    return this.waitingCount;
  }

  get activeCount(): number {
    return this.sequences.size - this.waitingCount;
  }

  enqueue(requests: readonly SequenceRequest[]): SequenceHandle[] {
    if (this.closed) throw new Error('the scheduler is closed');
    if (!this.isReady || !this.worker) throw new EngineUnavailableError('the generation engine is restarting');
    if (this.waitingCount + requests.length > this.opts.maxQueue) throw new QueueFullError(this.waitingCount);
    const ids = requests.map((request) => {
      const id = this.nextId++;
      this.sequences.set(id, { request, waiting: true });
      return id;
    });
    this.waitingCount += requests.length;
    // Choices of one request share their prompt array: send (and encode) each distinct prompt once.
    const byPrompt = new Map<readonly number[], SequenceSpec[]>();
    requests.forEach((request, i) => {
      const { temperature, topP, seed, presencePenalty, frequencyPenalty } = request.sampler.params;
      const spec: SequenceSpec = {
        id: ids[i]!,
        maxTokens: request.maxTokens,
        temperature,
        topP,
        ...(seed === undefined ? {} : { seed }),
        ...(presencePenalty ? { presencePenalty } : {}),
        ...(frequencyPenalty ? { frequencyPenalty } : {}),
        ...(request.streamed ? { streamed: true } : {}),
        ...(request.topLogprobs === undefined ? {} : { topLogprobs: request.topLogprobs }),
      };
      const specs = byPrompt.get(request.prompt);
      if (specs) specs.push(spec);
      else byPrompt.set(request.prompt, [spec]);
    });
    for (const [prompt, seqs] of byPrompt) this.send({ t: 'enqueue', prompt: [...prompt], seqs });
    this.report();
    return ids.map((id) => ({
      cancel: () => {
        if (this.remove(id)) {
          this.send({ t: 'cancel', ids: [id] });
          this.report();
        }
      },
    }));
  }

  /** Refuse new work and stop the worker; sequences still in flight fail with EngineUnavailableError. */
  async close(): Promise<void> {
    this.closed = true;
    this.isReady = false;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    this.worker = undefined;
    this.outbox = [];
    this.failAll(new EngineUnavailableError('the server is stopping'));
    await worker?.terminate();
  }

  /** Messages for the worker, sent together at the end of this event-loop turn (fewer thread wake-ups under load). */
  private outbox: ToWorker[] = [];

  private send(message: ToWorker): void {
    if (this.outbox.length === 0) setImmediate(() => this.flushOutbox());
    this.outbox.push(message);
  }

  private flushOutbox(): void {
    const messages = this.outbox;
    this.outbox = [];
    if (messages.length > 0) this.worker?.postMessage(messages);
  }

  /** Start a worker; resolves once its model is loaded. */
  private spawn(): Promise<void> {
    const data: EngineWorkerData = {
      entry: (this.opts.workerEntry ?? ENGINE_WORKER).href,
      modelDir: this.opts.modelDir,
      threads: this.opts.threads,
      executionProvider: this.opts.executionProvider,
      maxBatch: this.opts.maxBatch,
      batchWindowMs: this.opts.batchWindowMs,
      admissionWave: this.opts.admissionWave,
    };
    // Not the parent's execArgv: the bootstrap compiles the worker's TypeScript itself (tsx's CommonJS hook).
    const worker = new Worker(BOOTSTRAP, { workerData: data, execArgv: [] });
    this.worker = worker;
    this.starts++;
    // Never keep the process alive on its own: the HTTP server does while the service runs.
    worker.unref();
    return new Promise<void>((resolve, reject) => {
      let loaded = false;
      worker.on('message', (message: FromWorker) => {
        switch (message.t) {
          case 'events':
            this.apply(message);
            break;
          case 'ready':
            loaded = true;
            if (this.worker !== worker) break;
            this.isReady = true;
            this.restartDelay = this.opts.restartDelayMs ?? 200;
            resolve();
            break;
          case 'failed':
            reject(new Error(`the model could not be loaded: ${message.message}`));
            break;
          case 'warn':
            this.opts.logger.warn(message.message);
            break;
        }
      });
      worker.on('error', (err) => {
        this.opts.logger.error({ err }, 'generation worker failed');
        if (!loaded) reject(err);
      });
      worker.on('exit', (code) => {
        if (!loaded) reject(new Error(`the generation worker exited (code ${code}) before the model was loaded`));
        if (this.worker !== worker) return; // closed, or already replaced
        this.worker = undefined;
        this.outbox = [];
        this.isReady = false;
        this.failAll(new EngineUnavailableError(`the generation engine stopped (worker exit code ${code}); retry shortly`));
        if (!this.closed) this.scheduleRestart(code);
      });
    });
  }

  private scheduleRestart(code: number): void {
    const delay = this.restartDelay;
    this.restartDelay = Math.min(this.restartDelay * 2, 30_000);
    this.opts.logger.error({ exitCode: code, restartInMs: delay }, 'generation worker stopped; restarting it');
    this.restartTimer = setTimeout(() => {
      if (this.closed) return;
      this.spawn().then(
        () => this.opts.logger.info({ starts: this.starts }, 'generation worker restarted'),
        (err: unknown) => this.opts.logger.error({ err }, 'generation worker restart failed'),
      );
    }, delay);
    this.restartTimer.unref();
  }

  /** One step's worth of worker events, in the order a sequence lives them: admitted, tokens, finished. */
  private apply(e: EngineEvents): void {
    for (const id of e.admitted) {
      const s = this.sequences.get(id);
      if (s?.waiting) {
        s.waiting = false;
        this.waitingCount--;
      }
    }
    const observer = this.opts.observer;
    if (observer) {
      for (let i = 0; i < e.steps.length; i += 2) observer.stepped(e.steps[i]!, e.steps[i + 1]!);
      for (const seconds of e.firstTokens) observer.firstToken(seconds);
      for (const seconds of e.nextTokens) observer.nextToken(seconds);
    }
    const stopped: number[] = [];
    const logprobs = logprobsBySequence(e.logprobs);
    for (let i = 0; i < e.tokens.length; i += 2) {
      const id = e.tokens[i]!;
      const s = this.sequences.get(id);
      const tokenLogprobs = logprobs?.get(id)?.shift();
      if (!s) continue; // cancelled or stopped here; the worker has not heard yet
      let stop: boolean;
      try {
        stop = s.request.onToken(e.tokens[i + 1]!, tokenLogprobs);
      } catch (err) {
        this.remove(id);
        stopped.push(id);
        s.request.onError(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      if (stop) {
        this.remove(id);
        stopped.push(id);
        finish(s.request, 'stop');
      }
    }
    if (stopped.length > 0) this.send({ t: 'cancel', ids: stopped });
    for (let i = 0; i < e.finished.length; i += 2) {
      const id = e.finished[i]!;
      const s = this.sequences.get(id);
      if (!s) continue;
      this.remove(id);
      finish(s.request, e.finished[i + 1] === 0 ? 'stop' : 'length');
    }
    for (const [id, message] of e.errors) {
      const s = this.sequences.get(id);
      if (!s) continue;
      this.remove(id);
      s.request.onError(new Error(message));
    }
    this.report();
  }

  /** Forget a sequence (no more callbacks); false when it was already gone. */
  private remove(id: number): boolean {
    const s = this.sequences.get(id);
    if (!s) return false;
    if (s.waiting) this.waitingCount--;
    this.sequences.delete(id);
    return true;
  }

  private failAll(err: Error): void {
    const all = [...this.sequences.values()];
    this.sequences.clear();
    this.waitingCount = 0;
    for (const s of all) s.request.onError(err);
    this.report();
  }

  private report(): void {
    this.opts.observer?.queueChanged(this.waitingCount, this.sequences.size - this.waitingCount);
  }
}

/** The `logprobs` list of an events message, per sequence in token order (undefined when empty: the usual case). */
function logprobsBySequence(list: EngineEvents['logprobs'] | undefined): Map<number, TokenLogprobs[]> | undefined {
  if (!list || list.length === 0) return undefined;
  const bySequence = new Map<number, TokenLogprobs[]>();
  for (let i = 0; i < list.length; ) {
    const id = list[i]!;
    const k = list[i + 2]!;
    const entry = { logprob: list[i + 1]!, top: Array.from(list.slice(i + 3, i + 3 + 2 * k)) };
    i += 3 + 2 * k;
    const entries = bySequence.get(id);
    if (entries) entries.push(entry);
    else bySequence.set(id, [entry]);
  }
  return bySequence;
}

function finish(request: SequenceRequest, reason: 'stop' | 'length'): void {
  try {
    request.onFinish(reason);
  } catch (err) {
    request.onError(err instanceof Error ? err : new Error(String(err)));
  }
}
