import { DecodeBatch } from './decode-batch.js';
import { MODEL_DIMS, SPECIAL_TOKENS } from './model-spec.js';
import type { EncodedPrompt, OnnxTransformer } from './onnx-transformer.js';
import { tokenLogprobs, type TokenLogprobs, type TokenSampler } from './token-sampler.js';

// Module-local copies of the constants used per token (in the worker these modules are CommonJS,
// where each use of an import is a getter call).
const VOCAB = MODEL_DIMS.vocabSize;
const { EOS } = SPECIAL_TOKENS;

export type FinishReason = 'stop' | 'length';

/** One sequence to generate (one choice of a request). */
export interface SequenceRequest {
  prompt: readonly number[];
  maxTokens: number;
  sampler: TokenSampler;
  /**
   * Each generated content token (EOS is not passed), with its log-probabilities when topLogprobs is
   * set; return true to end the sequence here (a stop string matched).
   */
  onToken(id: number, logprobs?: TokenLogprobs): boolean;
  /** Report each token's log-probability and this many most likely alternatives (0..20); unset: none. */
  topLogprobs?: number;
  onFinish(reason: FinishReason): void;
  onError(err: Error): void;
  /** The sequence left the queue and joined the running batch (optional). */
  onStart?(): void;
  /**
   * Each token is wanted as soon as it is generated (a stream, or stop strings to match); otherwise
   * an engine in another thread may hand the tokens over with the finish.
   */
  streamed?: boolean;
}

/** What the HTTP handler needs from a generation engine: in this thread (GenerationScheduler) or in a worker. */
export interface SequenceQueue {
  /** Queue every sequence of one request, all or none; throws QueueFullError when the queue is full. */
  enqueue(requests: readonly SequenceRequest[]): SequenceHandle[];
}

export interface SchedulerObserver {
  queueChanged(waiting: number, active: number): void;
  stepped(batchSize: number, seconds: number): void;
  firstToken(secondsSinceEnqueue: number): void;
  nextToken(secondsSincePrevious: number): void;
}

export interface SchedulerOptions {
  /** Most sequences decoded together; 1 turns batching off (one sequence at a time, in arrival order). */
  maxBatch: number;
  /** When idle, wait this long after the first arrival so that concurrent requests start together. */
  batchWindowMs: number;
  /** Most sequences waiting for a batch slot; beyond it, enqueue() refuses. */
  maxQueue: number;
  /**
   * While sequences are decoding, prompts are admitted (encoded) in waves of at least this many (at
   * most maxBatch): when fewer wait, or fewer fit, they wait one decoder step for more to join their
   * encoder run. Default 8; 1 encodes whatever waits before every step.
   */
  admissionWave?: number;
  /**
   * Called before each admission, so that a caller whose requests arrive as messages can enqueue those
   * already delivered: the loop goes from the end of one decoder run to the next admission without
   * passing through the event loop, so an arrival during a run would otherwise wait another step.
   */
  beforeAdmit?: () => void;
}

/**
 * Each encoder run costs a fixed amount beyond its prompts' own work (ONNX Runtime's per-run overhead,
 * and the decoder's weights evicted from the CPU caches and read back). Under a busy batch arrivals
 * come one to three per step; in waves of 8 the encoder runs half as often and a full batch decodes
 * more tokens/s, for at most one step more before a prompt's first token (figures:
 * hack/bench/measurements.md).
 */
const DEFAULT_ADMISSION_WAVE = 8;

export class QueueFullError extends Error {
  constructor(readonly waiting: number) {
    super(`the generation queue is full (${waiting} waiting)`);
    this.name = 'QueueFullError';
  }
}

interface Sequence {
  request: SequenceRequest;
  enqueuedAt: number;
  lastTokenAt: number;
  lastToken: number;
  position: number;
  generated: number;
  cancelled: boolean;
}

/** The generation engine went away (its worker thread crashed or the server is stopping): retry shortly. */
export class EngineUnavailableError extends Error {
  constructor(message = 'the generation engine stopped') {
    super(message);
    this.name = 'EngineUnavailableError';
  }
}

export interface SequenceHandle {
  cancel(): void;
}

/**
 * Dynamic batching for generation: waiting sequences are admitted between decode steps, every
 * active sequence advances by one token per step (one decoder run for the whole batch), and
 * finished or cancelled ones leave at once. The queue in front is bounded (back-pressure).
 */
export class GenerationScheduler implements SequenceQueue {
  private readonly waiting: Sequence[] = [];
  /** The sequence in each batch row (the batch has no empty rows: a finished sequence's row is refilled at once). */
  private slots: Sequence[] = [];
  private readonly batch = new DecodeBatch();
  private running = false;
  /** The last admission was put off to gather a wave: the next one takes whatever waits. */
  private deferredAdmission = false;
  private closed = false;
  /** Most sequences active at once during the last busy period: was traffic concurrent? */
  private lastPeak = 0;
  private peak = 0;
  /** While waiting for concurrent arrivals: how many to wait for, and how to stop waiting. */
  private windowFilled: { enough: number; done: () => void } | undefined;

  constructor(
    private readonly model: OnnxTransformer,
    private readonly opts: SchedulerOptions,
    private readonly observer?: SchedulerObserver,
  ) {}

  get queueDepth(): number {
    return this.waiting.length;
  }

  get activeCount(): number {
    return this.slots.length;
  }

  /** Queue every sequence of one request, all or none. */
  enqueue(requests: readonly SequenceRequest[]): SequenceHandle[] {
    if (this.closed) throw new Error('the scheduler is closed');
    if (this.waiting.length + requests.length > this.opts.maxQueue) throw new QueueFullError(this.waiting.length);
    const now = performance.now();
    const sequences = requests.map(
      (request): Sequence => ({
        request,
        enqueuedAt: now,
        lastTokenAt: now,
        lastToken: SPECIAL_TOKENS.BOS,
        position: 0,
        generated: 0,
        cancelled: false,
      }),
    );
    this.waiting.push(...sequences);
    this.report();
    if (!this.running) void this.run();
    else if (this.windowFilled && this.waiting.length >= this.windowFilled.enough) this.windowFilled.done();
    return sequences.map((s) => ({ cancel: () => (s.cancelled = true) }));
  }

  /** Refuse new work; sequences already queued or running finish. */
  close(): void {
    this.closed = true;
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length > 0 || this.activeCount > 0) {
        // Starting from idle: wait a moment for concurrent arrivals, unless traffic has been one at a
        // time (then the window would only add latency; later arrivals join at the next step anyway).
        // The wait ends early once as many sequences wait as were active together last time (a
        // closed-loop load's next wave is usually complete well within the window).
        if (this.activeCount === 0 && this.opts.maxBatch > 1 && this.opts.batchWindowMs > 0 && this.lastPeak > 1) {
          const enough = Math.min(this.lastPeak, this.opts.maxBatch);
          if (this.waiting.length < enough) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                this.windowFilled = undefined;
                resolve();
              }, this.opts.batchWindowMs);
              this.windowFilled = {
                enough,
                done: () => {
                  clearTimeout(timer);
                  this.windowFilled = undefined;
                  resolve();
                },
              };
            });
          }
        }
        try {
          await this.admit();
          if (this.activeCount > 0) await this.step();
        } catch (err) {
          this.failActive(err instanceof Error ? err : new Error(String(err)));
        }
      }
    } finally {
      // Idle: let the batch's buffers go.
      if (this.activeCount === 0) {
        this.batch.compact(true);
        this.slots = [];
      }
      this.running = false;
      this.lastPeak = this.peak;
      this.peak = 0;
    }
  }

  private async admit(): Promise<void> {
    this.opts.beforeAdmit?.();
    for (let i = this.waiting.length - 1; i >= 0; i--) if (this.waiting[i]!.cancelled) this.waiting.splice(i, 1);
    const room = this.opts.maxBatch - this.activeCount;
    if (room <= 0 || this.waiting.length === 0) return;
    // Not capped by the room: when the batch is nearly full, putting off the one or two prompts that
    // fit lets the next run encode the ones that fit a step later as well (a slot stays empty for one step).
    const wave = Math.min(this.opts.admissionWave ?? DEFAULT_ADMISSION_WAVE, this.opts.maxBatch);
    if (this.activeCount > 0 && Math.min(this.waiting.length, room) < wave && !this.deferredAdmission) {
      this.deferredAdmission = true;
      return;
    }
    this.deferredAdmission = false;
    const admitted = this.waiting.splice(0, room);
    // Choices of one request share their prompt array: encode each distinct prompt once.
    const prompts = [...new Set(admitted.map((s) => s.request.prompt))];
    let encoded: EncodedPrompt[];
    try {
      encoded = await this.model.encode(prompts.map((p) => [...p]));
    } catch (err) {
      for (const s of admitted) s.request.onError(err instanceof Error ? err : new Error(String(err)));
      this.report();
      return;
    }
    const byPrompt = new Map<readonly number[], EncodedPrompt>(prompts.map((p, i) => [p, encoded[i]!]));
    const rows = this.batch.add(admitted.map((s) => byPrompt.get(s.request.prompt)!));
    rows.forEach((row, i) => (this.slots[row] = admitted[i]));
    for (const s of admitted) s.request.onStart?.();
    this.peak = Math.max(this.peak, this.activeCount + this.waiting.length);
    this.report();
  }

  private async step(): Promise<void> {
    this.batch.compact();
    const started = performance.now();
    const input = this.batch.stepInput(
      this.slots.map((s) => s.lastToken),
      this.slots.map((s) => s.position),
    );
    const out = await this.model.decodeStep(input);
    this.batch.advance(out);
    const now = performance.now();
    this.observer?.stepped(this.slots.length, (now - started) / 1000);
    const done: number[] = [];
    this.slots.forEach((s, row) => {
      if (this.advanceSequence(s, out.logits, row, now)) done.push(row);
    });
    if (done.length > 0) {
      const order = this.batch.release(done);
      this.slots = order.map((row) => this.slots[row]!);
    }
    this.report();
  }

  /** Sample this sequence's next token and hand it over; true when the sequence is done. */
  private advanceSequence(s: Sequence, logits: Float32Array, row: number, now: number): boolean {
    if (s.cancelled) return true;
    const token = s.request.sampler.sample(logits, row * VOCAB);
    if (s.generated === 0) this.observer?.firstToken((now - s.enqueuedAt) / 1000);
    else this.observer?.nextToken((now - s.lastTokenAt) / 1000);
    s.lastTokenAt = now;
    if (token === EOS) {
      this.finish(s, 'stop');
      return true;
    }
    s.generated++;
    let stopMatched: boolean;
    try {
      const k = s.request.topLogprobs;
      stopMatched = s.request.onToken(token, k === undefined ? undefined : tokenLogprobs(logits, row * VOCAB, token, k));
    } catch (err) {
      s.request.onError(err instanceof Error ? err : new Error(String(err)));
      return true;
    }
    if (stopMatched) {
      this.finish(s, 'stop');
      return true;
    }
    if (s.generated >= s.request.maxTokens) {
      this.finish(s, 'length');
      return true;
    }
    s.lastToken = token;
    s.position++;
    return false;
  }

  private finish(s: Sequence, reason: FinishReason): void {
    try {
      s.request.onFinish(reason);
    } catch (err) {
      s.request.onError(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private failActive(err: Error): void {
    for (const s of this.slots) s.request.onError(err);
    this.batch.release(this.slots.map((_, row) => row));
    this.batch.compact(true);
    this.slots = [];
    this.report();
  }

  private report(): void {
    this.observer?.queueChanged(this.waiting.length, this.activeCount);
  }
}
