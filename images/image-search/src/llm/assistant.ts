// LLM assistance over any chat-completions API (openai client): query expansion, result explanation,
// question answering over retrieved images, and multi-turn chat that may call the agent tools.
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Logger } from '../../../service-kit/src/index.js';
import type { SearchResultItem, SearchService } from '../search-service.js';
import { InputError } from '../search-service.js';
import { TOOLS, callTool } from './tools.js';

export interface AssistantOptions {
  baseURL: string;
  apiKey?: string;
  model: string;
  logger: Logger;
  /** Tool-call rounds allowed per chat turn. */
  maxToolRounds?: number;
}

export interface ChatToolCall {
  tool: string;
  arguments: unknown;
  result?: unknown;
  error?: string;
}

const SYSTEM = 'You are the assistant of Strata image search. Images are found by CLIP embeddings; be brief and concrete.';

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

  constructor(private readonly opts: AssistantOptions) {
    this.client = new OpenAI({ baseURL: opts.baseURL, apiKey: opts.apiKey ?? 'unused', maxRetries: 1, timeout: 60_000 });
  }

  get model(): string {
    return this.opts.model;
  }

  private async complete(messages: ChatCompletionMessageParam[]): Promise<string> {
    const response = await this.client.chat.completions.create({ model: this.opts.model, messages, temperature: 0.3 });
    return response.choices[0]?.message?.content?.trim() ?? '';
  }

  /** The original query followed by up to `n` distinct rewrites. */
  async expand(query: string, n = 3): Promise<string[]> {
    const text = await this.complete([
      { role: 'system', content: SYSTEM },
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
    const cleaned = variants.map((v) => v.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, '').replace(/^"|"$/g, '').trim()).filter(Boolean);
    const unique = [...new Set([query, ...cleaned])];
    return unique.slice(0, n + 1);
  }

  async explain(query: string, results: SearchResultItem[], service: SearchService): Promise<string> {
    return this.complete([
      { role: 'system', content: SYSTEM },
      { role: 'user', content: `Search: "${query}"\nResults:\n${await describe(results, service)}\nIn two or three sentences, explain how these results relate to the search.` },
    ]);
  }

  async answer(question: string, results: SearchResultItem[], service: SearchService): Promise<string> {
    return this.complete([
      { role: 'system', content: SYSTEM },
      {
        role: 'user',
        content: `Question: ${question}\nImages retrieved for it:\n${await describe(results, service)}\nAnswer the question using only these images; cite image ids.`,
      },
    ]);
  }

  /** One chat turn: the model may call tools (bounded rounds) before it answers. */
  async chat(history: ChatCompletionMessageParam[], service: SearchService): Promise<{ reply: string; toolCalls: ChatToolCall[]; messages: ChatCompletionMessageParam[] }> {
    const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, ...history];
    const toolCalls: ChatToolCall[] = [];
    const rounds = this.opts.maxToolRounds ?? 4;
    for (let round = 0; round <= rounds; round++) {
      const response = await this.client.chat.completions.create({
        model: this.opts.model,
        messages,
        ...(round < rounds ? { tools: TOOLS, tool_choice: 'auto' as const } : {}),
      });
      const message = response.choices[0]?.message;
      if (!message) throw new Error('the LLM returned no message');
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
          record.result = await callTool(service, call.function.name, record.arguments);
        } catch (err) {
          // Tool errors go back to the model as the tool's answer, so it can correct itself.
          record.error = err instanceof Error ? err.message : String(err);
        }
        toolCalls.push(record);
        messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(record.error ? { error: record.error } : record.result).slice(0, 20_000) });
      }
    }
    throw new InputError('the conversation needed more tool-call rounds than allowed', 502);
  }
}
