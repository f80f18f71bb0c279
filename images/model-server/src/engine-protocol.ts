/**
 * Messages between the HTTP thread and the generation worker (`engine-worker.ts`). Plain data only:
 * they are structured-cloned by postMessage.
 */

/** The model the worker loads and how it batches. */
export interface EngineSettings {
  modelDir: string;
  threads?: number;
  executionProvider?: 'cpu' | 'cuda';
  /** Most sequences decoded together; 1 = no batching. */
  maxBatch: number;
  batchWindowMs: number;
  /** See SchedulerOptions.admissionWave. */
  admissionWave?: number;
}

/** What the worker is started with (workerData). */
export interface EngineWorkerData extends EngineSettings {
  /** URL of the worker module the bootstrap imports (engine-worker.ts, or a test's stand-in). */
  entry: string;
}

/** One choice to generate; `id` is unique per server (assigned by the HTTP thread). */
export interface SequenceSpec {
  id: number;
  maxTokens: number;
  temperature: number;
  topP: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Tokens wanted as they come (stream or stop strings); otherwise they may come with the finish. */
  streamed?: boolean;
  /** Log-probabilities wanted, with this many alternatives per token. */
  topLogprobs?: number;
}

/** The HTTP thread sends these in arrays: everything queued during one turn of its event loop in one message. */
export type ToWorker =
  /** The choices of one request: they share the prompt, which is encoded once. */
  | { t: 'enqueue'; prompt: number[]; seqs: SequenceSpec[] }
  /** No more tokens for these sequences (client gone, or a stop string matched in the HTTP thread). */
  | { t: 'cancel'; ids: number[] };

/**
 * Numbers sent in bulk: the engine sends Float64Arrays (structured-cloned as one block of memory,
 * several times cheaper to post than arrays of numbers); plain arrays are accepted too.
 */
export type Numbers = readonly number[] | Float64Array;

/** What happened since the last report: sent once per decode step (and after each admission). */
export interface EngineEvents {
  t: 'events';
  /** Sequences that left the queue for the running batch. */
  admitted: Numbers;
  /** Pairs: sequence id, generated content token (EOS is not sent: it is a finish). */
  tokens: Numbers;
  /**
   * For each token of a sequence that wants log-probabilities, in the order of `tokens`: sequence id,
   * the token's log-probability, the number k of alternatives, then k pairs (id, log-probability).
   */
  logprobs: Numbers;
  /** Pairs: sequence id, 0 = 'stop' (EOS), 1 = 'length'. */
  finished: Numbers;
  errors: Array<[id: number, message: string]>;
  /** Pairs: batch size, seconds, per decoder step. */
  steps: Numbers;
  /** Seconds from enqueue to first token, per sequence that got one. */
  firstTokens: Numbers;
  /** Seconds between consecutive tokens of a sequence. */
  nextTokens: Numbers;
}

export type FromWorker = { t: 'ready'; executionProvider: 'cpu' | 'cuda' } | { t: 'failed'; message: string } | { t: 'warn'; message: string } | EngineEvents;
