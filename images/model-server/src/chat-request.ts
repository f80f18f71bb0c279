import { z } from 'zod';
import { MAX_OUTPUT_TOKENS } from './model-spec.js';

/** Most alternatives per position that `top_logprobs` may ask for (OpenAI's limit). */
export const MAX_TOP_LOGPROBS = 20;
/** Most stop sequences in one request (OpenAI's limit). */
export const MAX_STOP_SEQUENCES = 4;
import { OpenAIError } from './openai-errors.js';
import type { ChatMessageText, ChatRole } from './tokenizer.js';

const maxTokens = z.number().int().min(1).max(MAX_OUTPUT_TOKENS).nullable().optional();

const contentPart = z.object({ type: z.literal('text'), text: z.string() });

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
    // Assistant messages may carry null content (tool calls); every other role needs content.
    content: z
      .union([z.string(), z.array(contentPart)])
      .nullable()
      .optional(),
    name: z.string().optional(),
  })
  .refine((m) => m.role === 'assistant' || (m.content !== undefined && m.content !== null), {
    message: 'content is required for this role',
    path: ['content'],
  });

/**
 * The part of OpenAI's chat completions request that Strata serves; fields that change nothing here
 * (user, metadata...) are accepted and ignored, those it cannot honour are refused (refuseUnsupported).
 */
const chatRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).nullable().optional(),
  frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  stop: z
    .union([z.string().min(1), z.array(z.string().min(1)).max(MAX_STOP_SEQUENCES)])
    .nullable()
    .optional(),
  n: z.number().int().min(1).max(16).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullable().optional(),
});

export interface ChatRequest {
  model: string;
  messages: ChatMessageText[];
  maxTokens: number;
  /** undefined: the model's default (its generation_config.json), as vLLM does. */
  temperature?: number;
  topP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  seed?: number;
  stop: string[];
  n: number;
  stream: boolean;
  includeUsage: boolean;
  /** undefined: no logprobs; otherwise the number of most likely alternatives listed per token (0..20). */
  topLogprobs?: number;
}

/** Validate a parsed JSON body; the OpenAIError names the offending parameter as OpenAI does. */
export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw OpenAIError.invalid('The request body must be a JSON object.', null, 'invalid_request_body');
  }
  refuseUnsupported(body as Record<string, unknown>);
  refuseNonTextContent((body as Record<string, unknown>).messages);
  refuseTooManyStops((body as Record<string, unknown>).stop);
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const param = paramName(issue.path);
    if (valueAt(body, issue.path) === undefined && issue.code === 'invalid_type') {
      throw OpenAIError.invalid(`Missing required parameter: '${param}'.`, param, 'missing_required_parameter');
    }
    throw OpenAIError.invalid(`Invalid '${param}': ${issue.message}.`, param, isTypeError(issue) ? 'invalid_type' : 'invalid_value');
  }
  const r = result.data;
  if (typeof r.top_logprobs === 'number' && r.logprobs !== true) {
    throw OpenAIError.invalid("Invalid 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.", 'top_logprobs', 'invalid_value');
  }
  return {
    model: r.model,
    messages: r.messages.map((m) => ({ role: m.role as ChatRole, content: textOf(m.content) })),
    maxTokens: r.max_completion_tokens ?? r.max_tokens ?? MAX_OUTPUT_TOKENS,
    ...(typeof r.temperature === 'number' ? { temperature: r.temperature } : {}),
    ...(typeof r.top_p === 'number' ? { topP: r.top_p } : {}),
    ...(r.presence_penalty ? { presencePenalty: r.presence_penalty } : {}),
    ...(r.frequency_penalty ? { frequencyPenalty: r.frequency_penalty } : {}),
    seed: r.seed ?? undefined,
    stop: r.stop === undefined || r.stop === null ? [] : typeof r.stop === 'string' ? [r.stop] : r.stop,
    n: r.n ?? 1,
    stream: r.stream ?? false,
    includeUsage: r.stream_options?.include_usage ?? false,
    ...(r.logprobs ? { topLogprobs: r.top_logprobs ?? 0 } : {}),
  };
}

/**
 * Parameters that would change the answer in ways these models cannot honour are refused (400
 * unsupported_parameter, naming the parameter), never silently ignored; their neutral values (no tools,
 * tool_choice "none", text format, an empty logit_bias) are accepted.
 */
function refuseUnsupported(body: Record<string, unknown>): void {
  const present = (v: unknown) => v !== undefined && v !== null;
  const unsupported = (param: string, why: string): never => {
    throw OpenAIError.invalid(`Unsupported parameter: '${param}' is not supported by this server: ${why}.`, param, 'unsupported_parameter');
  };
  const toolChoice = body.tool_choice;
  const hasTools = (v: unknown) => (Array.isArray(v) ? v.length > 0 : present(v));
  if (hasTools(body.tools) && toolChoice !== 'none') unsupported('tools', 'the models cannot call tools (tool_choice "none" is accepted)');
  if (present(toolChoice) && toolChoice !== 'none' && toolChoice !== 'auto') unsupported('tool_choice', 'the models cannot call tools');
  if (hasTools(body.functions) && body.function_call !== 'none') unsupported('functions', 'the models cannot call functions');
  const format = body.response_format as { type?: unknown } | null | undefined;
  if (present(format) && (typeof format !== 'object' || format!.type !== 'text')) unsupported('response_format', 'only {"type": "text"} is supported');
  const bias = body.logit_bias;
  if (present(bias) && (typeof bias !== 'object' || Object.keys(bias as object).length > 0)) unsupported('logit_bias', 'logit biases are not implemented');
  // Only text comes out: ["text"] is accepted, any other output modality is refused by name.
  const modalities = body.modalities;
  if (present(modalities)) {
    const other = Array.isArray(modalities) ? modalities.find((m) => m !== 'text') : modalities;
    if (other !== undefined) {
      throw OpenAIError.invalid(
        `Unsupported value: 'modalities' does not support ${JSON.stringify(other)} with this model. Supported values are: ["text"].`,
        'modalities',
        'unsupported_value',
      );
    }
  }
  if (present(body.audio)) unsupported('audio', 'the models answer text only');
}

/** Content part types OpenAI knows that these text-only models cannot read. */
const NON_TEXT_PARTS = new Set(['image_url', 'input_audio', 'file']);

/** A message part that is not text gets OpenAI's own refusal, naming the part, instead of a bare schema error. */
function refuseNonTextContent(messages: unknown): void {
  if (!Array.isArray(messages)) return;
  messages.forEach((message, i) => {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) return;
    content.forEach((part, j) => {
      const type = (part as { type?: unknown } | null)?.type;
      const param = `messages[${i}].content[${j}].type`;
      if (typeof type === 'string' && NON_TEXT_PARTS.has(type)) {
        throw OpenAIError.invalid(
          `Invalid content type. ${type} is only supported by certain models; this server's models read text only.`,
          param,
          'invalid_value',
        );
      }
      if (type !== 'text') throw OpenAIError.invalid(`Invalid '${param}': expected 'text', got ${JSON.stringify(type) ?? 'nothing'}.`, param, 'invalid_value');
    });
  });
}

/** OpenAI allows up to 4 stop sequences and says so in these words. */
function refuseTooManyStops(stop: unknown): void {
  if (Array.isArray(stop) && stop.length > MAX_STOP_SEQUENCES) {
    throw OpenAIError.invalid(
      `Invalid 'stop': array too long. Expected an array with maximum length ${MAX_STOP_SEQUENCES}, but got an array with length ${stop.length} instead.`,
      'stop',
      'array_above_max_length',
    );
  }
}

/** A wrong JSON type (as opposed to a value out of range); for a union, only if no alternative got further. */
function isTypeError(issue: z.core.$ZodIssue): boolean {
  if (issue.code === 'invalid_type') return true;
  if (issue.code === 'invalid_union') return issue.errors.every((branch) => branch.every(isTypeError));
  return false;
}

function textOf(content: string | Array<{ text: string }> | null | undefined): string {
  if (content === undefined || content === null) return '';
  return typeof content === 'string' ? content : content.map((p) => p.text).join(' ');
}

/** ['messages', 0, 'role'] → "messages[0].role" */
function paramName(path: readonly PropertyKey[]): string {
  return path.reduce<string>((name, key) => (typeof key === 'number' ? `${name}[${key}]` : name ? `${name}.${String(key)}` : String(key)), '');
}

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value: unknown = body;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}
