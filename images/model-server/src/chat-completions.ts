import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { FairPool, ShareRefusal } from '../../service-kit/src/fair-pool.js';
import type { Logger } from '../../service-kit/src/logger.js';
import { ChoiceText } from './choice-text.js';
import { parseChatRequest, type ChatRequest } from './chat-request.js';
import { EngineUnavailableError, QueueFullError, type FinishReason, type SequenceHandle, type SequenceQueue } from './generation-scheduler.js';
import type { ModelServerMetrics } from './metrics.js';
import { MAX_PROMPT_TOKENS } from './model-spec.js';
import { OpenAIError, sendOpenAIError } from './openai-errors.js';
import type { SamplingDefaults } from './served-models.js';
import { TokenSampler } from './token-sampler.js';
import { encodeChat, encodeChatTail, type ModelTokenizer } from './tokenizer.js';

/** A model as the handler serves it: its tokenizer and its generation engine. */
export interface ServedModel {
  tokenizer: ModelTokenizer;
  /** temperature and top_p for requests that leave them out. */
  sampling: SamplingDefaults;
  /** The generation engine; undefined until the model is loaded (and while its worker restarts). */
  scheduler: () => SequenceQueue | undefined;
  /**
   * The engine's sequences (waiting and decoding), shared fairly between callers: no caller takes
   * more than its share, so one that floods the server leaves room for the others (absent: no shares).
   */
  shares?: FairPool;
}

export interface ChatCompletionsDeps {
  /** By the name a request's `model` gives. */
  models: ReadonlyMap<string, ServedModel>;
  metrics: ModelServerMetrics;
  logger: Logger;
  /**
   * Keep the last tokens of a prompt longer than the context instead of refusing it (as llama.cpp's
   * server does); off by default, as in OpenAI's API.
   */
  truncatePrompt?: boolean;
  /** Who is asking, for the shares of the engine (the API key, or the client's address); default: one caller. */
  callerOf?: (req: http.IncomingMessage) => string;
}

interface Choice {
  index: number;
  text: ChoiceText;
  finishReason?: FinishReason;
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** POST /v1/chat/completions: validate, queue one sequence per choice, answer as JSON or as SSE chunks. */
export function chatCompletionsHandler(deps: ChatCompletionsDeps) {
  return async (req: http.IncomingMessage & { body?: unknown }, res: http.ServerResponse): Promise<void> => {
    let request: ChatRequest;
    let prompt: number[];
    let model: ServedModel;
    try {
      if (req.body === undefined) throw OpenAIError.invalid('The request body is empty; send a JSON object.', null, 'invalid_request_body');
      request = parseChatRequest(req.body);
      const found = deps.models.get(request.model);
      if (!found) {
        deps.metrics.completions.inc({ model: 'unknown', outcome: 'not_found', stream: 'false' });
        throw new OpenAIError(
          404,
          `The model '${request.model}' does not exist or you do not have access to it.`,
          'invalid_request_error',
          'model',
          'model_not_found',
        );
      }
      model = found;
      // Either way a huge prompt costs no more than the context (this runs on the event loop every
      // service of the standalone process shares): without truncation, encoding stops just past the
      // context; with it, only the messages' tails are encoded (the prompt ends with EOS, so its tail
      // keeps the end marker and the latest words).
      prompt = deps.truncatePrompt
        ? encodeChatTail(request.messages, model.tokenizer, MAX_PROMPT_TOKENS)
        : encodeChat(request.messages, model.tokenizer, MAX_PROMPT_TOKENS);
      if (prompt.length > MAX_PROMPT_TOKENS) {
        throw OpenAIError.invalid(
          `This model's maximum context length is ${MAX_PROMPT_TOKENS} tokens. However, your messages resulted in more than ${MAX_PROMPT_TOKENS} tokens.`,
          'messages',
          'context_length_exceeded',
        );
      }
    } catch (err) {
      if (!(err instanceof OpenAIError)) throw err;
      if (err.status === 400) deps.metrics.completions.inc({ model: 'unknown', outcome: 'invalid', stream: 'false' });
      sendOpenAIError(res, err);
      return;
    }
    const labels = { model: request.model, stream: String(request.stream) };
    const scheduler = model.scheduler();
    if (!scheduler) {
      deps.metrics.completions.inc({ ...labels, outcome: 'rejected' });
      sendOpenAIError(res, new OpenAIError(503, 'The model is still loading; retry shortly.', 'server_error', null, 'model_not_ready'));
      return;
    }
    const release = takeShares(model.shares, deps.callerOf?.(req) ?? '', request.n);
    if (typeof release === 'string') {
      deps.metrics.completions.inc({ ...labels, outcome: 'rejected' });
      const message =
        release === 'pool-full'
          ? 'The server is at capacity (generation queue full); retry shortly.'
          : 'Your share of the generation queue is in use (other callers are waiting too); retry shortly.';
      sendOpenAIError(res, new OpenAIError(429, message, 'rate_limit_error', null, release === 'pool-full' ? 'queue_full' : 'queue_share'));
      return;
    }
    // Held until the answer ends or its client leaves (which cancels the sequences).
    res.once('close', release);
    deps.metrics.promptTokens.inc({ model: request.model }, prompt.length);

    const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
    const created = Math.floor(Date.now() / 1000);
    const choices: Choice[] = Array.from({ length: request.n }, (_, index) => ({ index, text: new ChoiceText(request.stop, model.tokenizer) }));
    const usage = (): Usage => {
      const completion = choices.reduce((n, c) => n + c.text.ids.length, 0);
      return { prompt_tokens: prompt.length, completion_tokens: completion, total_tokens: prompt.length + completion };
    };
    const withLogprobs = request.topLogprobs !== undefined;
    const stream = request.stream ? new ChunkStream(res, id, created, request.model, withLogprobs) : undefined;

    let done = false;
    let cancelled = false;
    let handles: SequenceHandle[] = [];
    let settle = () => {};
    const finished = new Promise<void>((resolve, reject) => {
      // A cancelled sequence gets no more callbacks: the close handler settles the request instead.
      settle = resolve;
      let remaining = choices.length;
      try {
        handles = scheduler.enqueue(
          choices.map((choice) => ({
            prompt,
            streamed: request.stream || request.stop.length > 0,
            maxTokens: request.maxTokens,
            topLogprobs: request.topLogprobs,
            sampler: new TokenSampler({
              temperature: request.temperature ?? model.sampling.temperature,
              topP: request.topP ?? model.sampling.topP,
              presencePenalty: request.presencePenalty,
              frequencyPenalty: request.frequencyPenalty,
              // Each choice gets its own stream of random numbers, all derived from the request's seed.
              seed: request.seed === undefined ? undefined : (request.seed + choice.index * 1_000_003) >>> 0,
            }),
            onToken: (tokenId, logprobs) => {
              const stopped = choice.text.push(tokenId, logprobs);
              stream?.content(choice.index, choice.text.takeDelta(), choice.text);
              return stopped;
            },
            onFinish: (reason) => {
              choice.finishReason = reason;
              stream?.content(choice.index, choice.text.takeDelta(true), choice.text, true);
              stream?.finish(choice.index, reason);
              if (--remaining === 0) resolve();
            },
            onError: reject,
          })),
        );
      } catch (err) {
        reject(err);
      }
    });
    res.on('close', () => {
      if (done) return;
      cancelled = true;
      for (const h of handles) h.cancel();
      deps.metrics.completions.inc({ ...labels, outcome: 'cancelled' });
      settle();
    });

    try {
      if (stream) {
        // Queue first, then commit to a 200 stream: a full queue still gets a proper 429.
        await Promise.race([finished, Promise.resolve()]);
        stream.open(choices.map((c) => c.index));
      }
      await finished;
      if (cancelled) return;
      done = true;
      deps.metrics.completions.inc({ ...labels, outcome: 'ok' });
      if (stream) {
        stream.end(request.includeUsage ? usage() : undefined);
        return;
      }
      // Written directly rather than with res.json(): Express would also hash the body for an ETag
      // and check request freshness, per-request work that a completion (never cached) does not need.
      res.statusCode = 200;
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: request.model,
          choices: choices.map((c) => ({
            index: c.index,
            message: { role: 'assistant', content: c.text.text, refusal: null },
            logprobs: withLogprobs ? { content: c.text.logprobs, refusal: null } : null,
            finish_reason: c.finishReason,
          })),
          usage: usage(),
        }),
      );
    } catch (err) {
      if (cancelled) return;
      done = true;
      for (const h of handles) h.cancel(); // the request's other choices, if any
      const queueFull = err instanceof QueueFullError;
      const unavailable = err instanceof EngineUnavailableError;
      deps.metrics.completions.inc({ ...labels, outcome: queueFull ? 'rejected' : 'error' });
      const error = queueFull
        ? new OpenAIError(429, 'The server is at capacity (generation queue full); retry shortly.', 'rate_limit_error', null, 'queue_full')
        : unavailable
          ? new OpenAIError(503, 'The model is restarting; retry shortly.', 'server_error', null, 'model_not_ready')
          : new OpenAIError(500, 'The model failed to generate a response.', 'server_error', null, 'generation_failed');
      if (unavailable) deps.logger.warn({ err }, 'generation engine unavailable');
      else if (!queueFull) deps.logger.error({ err }, 'generation failed');
      if (stream?.opened) stream.fail(error);
      else sendOpenAIError(res, error);
    }
  };
}

/** `count` slots of `caller`'s share, all or none: their release, or why they were refused. */
function takeShares(pool: FairPool | undefined, caller: string, count: number): (() => void) | ShareRefusal {
  if (!pool) return () => undefined;
  const taken: Array<() => void> = [];
  const releaseAll = () => {
    for (const release of taken) release();
  };
  for (let i = 0; i < count; i++) {
    const slot = pool.tryTake(caller);
    if (typeof slot === 'string') {
      releaseAll();
      return slot;
    }
    taken.push(slot);
  }
  return releaseAll;
}

/** Server-sent `chat.completion.chunk` events, ending with `data: [DONE]`. */
class ChunkStream {
  opened = false;
  private readonly pending: string[] = [];

  constructor(
    private readonly res: http.ServerResponse,
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly withLogprobs: boolean,
  ) {}

  /** Send headers and each choice's role chunk, then anything generated meanwhile. */
  open(indices: number[]): void {
    this.res.statusCode = 200;
    this.res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    this.res.setHeader('Cache-Control', 'no-cache');
    this.res.setHeader('Connection', 'keep-alive');
    this.res.setHeader('X-Accel-Buffering', 'no');
    this.res.flushHeaders();
    this.opened = true;
    for (const index of indices) this.send([{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
    for (const event of this.pending.splice(0)) this.res.write(event);
  }

  /** A content delta; with log-probabilities, the entries of the tokens it begins travel with it. */
  content(index: number, text: string, choice: ChoiceText, final = false): void {
    if (!text) return;
    const logprobs = this.withLogprobs ? { content: choice.takeLogprobs(final), refusal: null } : null;
    this.send([{ index, delta: { content: text }, logprobs, finish_reason: null }]);
  }

  finish(index: number, reason: FinishReason): void {
    this.send([{ index, delta: {}, logprobs: null, finish_reason: reason }]);
  }

  end(usage?: Usage): void {
    if (usage) this.send([], usage);
    this.res.end('data: [DONE]\n\n');
  }

  fail(error: OpenAIError): void {
    this.res.end(`data: ${JSON.stringify(error.body())}\n\ndata: [DONE]\n\n`);
  }

  private send(choices: unknown[], usage?: Usage): void {
    const chunk = {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices,
      ...(usage ? { usage } : {}),
    };
    const event = `data: ${JSON.stringify(chunk)}\n\n`;
    if (this.opened) this.res.write(event);
    else this.pending.push(event);
  }
}
