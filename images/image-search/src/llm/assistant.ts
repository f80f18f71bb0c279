// LLM assistance over any chat-completions API (openai client): query expansion, result explanation,
// question answering over retrieved images, and multi-turn chat that may call the agent tools.
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Logger } from '../../../service-kit/src/index.js';
import type { Viewer } from '../image-access.js';
import type { SearchResultItem, SearchService } from '../search-service.js';
import { callTool, toolsFor } from './tools.js';

export interface AssistantOptions {
  baseURL: string;
  apiKey?: string;
  /** The chat model; unset: the first model the upstream's /v1/models lists. */
  model?: string;
  logger: Logger;
  /** Tool-call rounds allowed per chat turn. */
  maxToolRounds?: number;
  /** Seconds one LLM request may take (interactive: the caller waits), default 10. */
  timeoutSeconds?: number;
  /** Retries of a failed LLM request (each may take timeoutSeconds), default 0. */
  maxRetries?: number;
  /** The image encoder running (describeModel), named to the model as it is; null: none loaded. */
  encoder?: { backbone: string; testEncoder: boolean } | null;
}

export interface ChatToolCall {
  tool: string;
  arguments: unknown;
  result?: unknown;
  error?: string;
}

/** One chat turn's answer; `note` says how it was made when not the usual way (the model refused tools). */
export interface ChatTurn {
  reply: string;
  toolCalls: ChatToolCall[];
  messages: ChatCompletionMessageParam[];
  note?: string;
}

/**
 * What the page's badge and GET /api/status say about the LLM: whether it answers (its last answer, not its
 * configuration). A request it refused (400: a parameter it does not take, a prompt too long) was answered:
 * the LLM is up, the state is ok.
 */
export interface LlmHealth {
  state: 'checking' | 'ok' | 'error';
  model: string | null;
  /** Where the model name comes from. */
  modelSource: 'LLM_MODEL' | 'upstream /v1/models';
  error: string | null;
}

/** The upstream LLM failed (the message says how; `cause`: the client's error); routes answer 502 with it. */
export class LlmUpstreamError extends Error {}

/** Whether the upstream refused a request for its tools (e.g. Strata's model server: "Unsupported parameter: 'tools'"). */
function refusedTools(err: unknown): boolean {
  const cause = err instanceof LlmUpstreamError ? err.cause : err;
  if (!(cause instanceof OpenAI.APIError) || cause.status !== 400) return false;
  return cause.param === 'tools' || cause.param === 'tool_choice' || /\btools?\b|tool_choice/i.test(upstreamMessage(cause));
}

/** The upstream's own words for a failure of the openai client (status, message), else the error's message. */
export function upstreamMessage(err: unknown): string {
  if (err instanceof OpenAI.APIError) {
    const body = err.error as { message?: unknown } | undefined;
    const detail = typeof body?.message === 'string' ? body.message : err.message;
    return err.status ? `the LLM answered ${err.status}: ${detail}` : `the LLM is unreachable: ${detail}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The system prompt: it says which encoder finds the images (the test encoder is not CLIP and matches colours only). */
export function systemPrompt(encoder: AssistantOptions['encoder']): string {
  const how =
    encoder === undefined
      ? 'images are found by their embeddings'
      : encoder === null
        ? 'no image encoder is loaded, so searches find nothing'
        : encoder.testEncoder
          ? `Images are found by ${encoder.backbone}, a test encoder that is not CLIP: it matches colours and textures only, not meaning`
          : `Images are found by CLIP ${encoder.backbone} embeddings`;
  return `You are the assistant of Strata image search. ${how.charAt(0).toUpperCase()}${how.slice(1)}; be brief and concrete.`;
}

/** Describe results for the model: id, path and caption, one per line. */
async function describe(results: SearchResultItem[], service: SearchService): Promise<string> {
  const lines = await Promise.all(
    results.slice(0, 20).map(async (r) => {
      const caption = await service.captionOf(r.path);
      return `- id ${r.id}: ${r.path} (distance ${r.distance.toFixed(3)})${caption ? ` — ${caption}` : ''}`;
    }),
  );
  return lines.join('\n') || '(no results)';
}

export class LlmAssistant {
  private readonly client: OpenAI;
  private resolvedModel: string | null;
  private health: LlmHealth;
  /** The upstream refused tools once: chat turns retrieve first and then ask, without offering tools. */
  private toolsRefused = false;
  private readonly system: string;

  constructor(private readonly opts: AssistantOptions) {
    this.client = new OpenAI({
      baseURL: opts.baseURL,
      apiKey: opts.apiKey ?? 'unused',
      maxRetries: opts.maxRetries ?? 0,
      timeout: (opts.timeoutSeconds ?? 10) * 1000,
    });
    this.resolvedModel = opts.model ?? null;
    this.system = systemPrompt(opts.encoder);
    this.health = { state: 'checking', model: this.resolvedModel, modelSource: opts.model ? 'LLM_MODEL' : 'upstream /v1/models', error: null };
  }

  get model(): string | null {
    return this.resolvedModel;
  }

  status(): LlmHealth {
    return { ...this.health, model: this.resolvedModel };
  }

  /**
   * Ask the upstream which models it offers: picks the first when LLM_MODEL is unset, and tells
   * whether the configured one is among them. The outcome is the health until the next call.
   */
  async check(): Promise<LlmHealth> {
    await this.run(() => this.listModels()).catch(() => undefined);
    return this.status();
  }

  private async listModels(): Promise<void> {
    const ids: string[] = [];
    for await (const model of this.client.models.list()) ids.push(model.id);
    if (!this.opts.model) {
      if (!ids.length) throw new LlmUpstreamError('the LLM lists no models at /v1/models: set LLM_MODEL');
      this.resolvedModel = ids[0];
    } else if (ids.length && !ids.includes(this.opts.model)) {
      throw new LlmUpstreamError(`the LLM does not offer LLM_MODEL=${this.opts.model} (it lists ${ids.slice(0, 5).join(', ')})`);
    }
  }

  /** Run an upstream call, keeping the health up to date; failures become LlmUpstreamError. */
  private async run<T>(call: () => Promise<T>): Promise<T> {
    try {
      const result = await call();
      this.health = { ...this.health, state: 'ok', error: null };
      return result;
    } catch (err) {
      const message = err instanceof LlmUpstreamError ? err.message : upstreamMessage(err);
      const refused = err instanceof OpenAI.APIError && err.status === 400;
      if (refused) this.health = { ...this.health, state: 'ok', error: null };
      else this.health = { ...this.health, state: 'error', error: message };
      this.opts.logger.warn({ error: message }, 'LLM request failed');
      throw new LlmUpstreamError(message, { cause: err });
    }
  }

  /** The model to call: LLM_MODEL, or the upstream's first one (looked up once it is needed). */
  private async chatModel(): Promise<string> {
    if (!this.resolvedModel) await this.run(() => this.listModels());
    return this.resolvedModel!;
  }

  private async complete(messages: ChatCompletionMessageParam[]): Promise<string> {
    const model = await this.chatModel();
    const response = await this.run(() => this.client.chat.completions.create({ model, messages, temperature: 0.3 }));
    return response.choices[0]?.message?.content?.trim() ?? '';
  }

  /** The original query followed by up to `n` distinct rewrites. */
  async expand(query: string, n = 3): Promise<string[]> {
    const text = await this.complete([
      { role: 'system', content: this.system },
      {
        role: 'user',
        content: `Write ${n} alternative short descriptions of images that match the search "${query}". Answer with one description per line, nothing else.`,
      },
    ]);
    let variants: string[];
    try {
      const parsed: unknown = JSON.parse(text);
      variants = Array.isArray(parsed) ? parsed.map(String) : [];
    } catch {
      variants = text.split('\n');
    }
    const cleaned = variants
      .map((v) =>
        v
          .replace(/^\s*(?:[-*•]|\d+[.)])\s*/, '')
          .replace(/^"|"$/g, '')
          .trim(),
      )
      .filter(Boolean);
    const unique = [...new Set([query, ...cleaned])];
    return unique.slice(0, n + 1);
  }

  async explain(query: string, results: SearchResultItem[], service: SearchService): Promise<string> {
    return this.complete([
      { role: 'system', content: this.system },
      {
        role: 'user',
        content: `Search: "${query}"\nResults:\n${await describe(results, service)}\nIn two or three sentences, explain how these results relate to the search.`,
      },
    ]);
  }

  async answer(question: string, results: SearchResultItem[], service: SearchService): Promise<string> {
    return this.complete([
      { role: 'system', content: this.system },
      {
        role: 'user',
        content: `Question: ${question}\nImages retrieved for it:\n${await describe(results, service)}\nAnswer the question using only these images; cite image ids.`,
      },
    ]);
  }

  /**
   * One chat turn: the model may call tools (bounded rounds; writing ones only with `canWrite`) before
   * it answers; its searches see what `viewer` may read. A model that refuses tools gets the turn without
   * them: the images are retrieved for the last user message first and given to it (the `note` says so).
   */
  async chat(history: ChatCompletionMessageParam[], service: SearchService, options: { canWrite?: boolean; viewer: Viewer }): Promise<ChatTurn> {
    if (!this.toolsRefused) {
      try {
        return await this.chatWithTools(history, service, options);
      } catch (err) {
        if (!refusedTools(err)) throw err;
        this.toolsRefused = true;
        this.opts.logger.info({ error: (err as Error).message }, 'the LLM refuses tools: chat retrieves first, then asks');
      }
    }
    return this.chatWithoutTools(history, service, options.viewer);
  }

  private async chatWithoutTools(history: ChatCompletionMessageParam[], service: SearchService, viewer: Viewer): Promise<ChatTurn> {
    const lastUser = history.findLastIndex((m) => m.role === 'user');
    const question = lastUser < 0 ? '' : String(history[lastUser].content ?? '');
    const args = { query: question, topk: 5 };
    const results = question.trim() ? await service.searchTexts([question], args.topk, viewer) : [];
    const asked: ChatCompletionMessageParam[] = [
      ...history.slice(0, Math.max(lastUser, 0)),
      {
        role: 'user',
        content: `${question}\nImages retrieved for it:\n${await describe(results, service)}\nAnswer using only these images; cite image ids.`,
      },
    ];
    const reply = await this.complete([{ role: 'system', content: this.system }, ...asked]);
    return {
      reply,
      toolCalls: [{ tool: 'search_by_text', arguments: args, result: { query: question, results } }],
      messages: [...history, { role: 'assistant', content: reply }],
      note: 'This LLM does not accept tools: the images were retrieved for your last message first and given to it with the question.',
    };
  }

  private async chatWithTools(
    history: ChatCompletionMessageParam[],
    service: SearchService,
    { canWrite = false, viewer }: { canWrite?: boolean; viewer: Viewer },
  ): Promise<ChatTurn> {
    const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: this.system }, ...history];
    const toolCalls: ChatToolCall[] = [];
    const rounds = this.opts.maxToolRounds ?? 4;
    const model = await this.chatModel();
    for (let round = 0; round <= rounds; round++) {
      const response = await this.run(() =>
        this.client.chat.completions.create({
          model,
          messages,
          ...(round < rounds ? { tools: toolsFor(canWrite), tool_choice: 'auto' as const } : {}),
        }),
      );
      const message = response.choices[0]?.message;
      if (!message) throw new LlmUpstreamError('the LLM returned no message');
      const calls = (message.tool_calls ?? []).filter((c) => c.type === 'function');
      if (!calls.length) {
        const reply = message.content ?? '';
        messages.push({ role: 'assistant', content: reply });
        return { reply, toolCalls, messages: messages.slice(1) };
      }
      messages.push({ role: 'assistant', content: message.content ?? null, tool_calls: calls });
      for (const call of calls) {
        const record: ChatToolCall = { tool: call.function.name, arguments: undefined };
        try {
          record.arguments = JSON.parse(call.function.arguments || '{}');
          record.result = await callTool(service, call.function.name, record.arguments, { canWrite, viewer });
        } catch (err) {
          // Tool errors go back to the model as the tool's answer, so it can correct itself.
          record.error = err instanceof Error ? err.message : String(err);
        }
        toolCalls.push(record);
        messages.push({
          role: 'tool',
          tool_call_id: call.id,
          content: JSON.stringify(record.error ? { error: record.error } : record.result).slice(0, 20_000),
        });
      }
    }
    throw new LlmUpstreamError('the conversation needed more tool-call rounds than allowed');
  }
}
