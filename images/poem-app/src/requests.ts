import { z } from 'zod';
import { HttpError, type ErrorDetail } from './http-errors.js';
import { POEM_TYPES, poemTypeByCode, poemTypeByLabelOrCode, type PoemType } from './poem-types.js';

export const MAX_THEME_LENGTH = 200;
export const MAX_CONTENT_LENGTH = 10_000;
export const MAX_MODEL_LENGTH = 200;
export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 500;

const codes = POEM_TYPES.map((t) => t.code).join(', ');
const labels = POEM_TYPES.map((t) => t.label).join(', ');

// Whitespace runs (including newlines) in a theme collapse to one space: a theme is a one-line subject.
const theme = z
  .string({ error: 'theme is required and must be a string' })
  .transform((s) => s.replace(/\s+/g, ' ').trim())
  .pipe(z.string().min(1, 'theme must not be empty').max(MAX_THEME_LENGTH, `theme must be at most ${MAX_THEME_LENGTH} characters`));

const generateSchema = z.object(
  {
    type: z.string({ error: `type is required: one of ${codes}` }).transform((code, ctx): PoemType => {
      const found = poemTypeByCode(code.trim());
      if (!found) {
        ctx.addIssue({ code: 'custom', message: `unknown poem type "${code}"; use one of ${codes}` });
        return z.NEVER;
      }
      return found;
    }),
    theme,
  },
  { error: 'request body must be a JSON object' },
);

const saveSchema = z.object(
  {
    type: z.string({ error: `type is required: one of ${labels}` }).transform((value, ctx): PoemType => {
      const found = poemTypeByLabelOrCode(value);
      if (!found) {
        ctx.addIssue({ code: 'custom', message: `unknown poem type "${value}"; use one of ${labels}` });
        return z.NEVER;
      }
      return found;
    }),
    theme,
    content: z
      .string({ error: 'content is required and must be a string' })
      .transform((s) => s.replace(/\r\n?/g, '\n').trim())
      .pipe(z.string().min(1, 'content must not be empty').max(MAX_CONTENT_LENGTH, `content must be at most ${MAX_CONTENT_LENGTH} characters`)),
    // The model that wrote the poem (as /api/generate-poem named it); absent or null: not known.
    model: z
      .string({ error: 'model must be a string' })
      .trim()
      .max(MAX_MODEL_LENGTH, `model must be at most ${MAX_MODEL_LENGTH} characters`)
      .nullish()
      .transform((m) => m || null),
  },
  { error: 'request body must be a JSON object' },
);

const limitSchema = z.coerce
  .number({ error: 'limit must be a number' })
  .int('limit must be a whole number')
  .min(1, 'limit must be at least 1')
  .max(MAX_LIST_LIMIT, `limit must be at most ${MAX_LIST_LIMIT}`)
  .default(DEFAULT_LIST_LIMIT);

export interface GenerateRequest {
  type: PoemType;
  theme: string;
}

export interface SaveRequest {
  type: PoemType;
  theme: string;
  content: string;
  model: string | null;
}

export function parseGenerateRequest(body: unknown): GenerateRequest {
  return parse(generateSchema, requireJsonBody(body));
}

export function parseSaveRequest(body: unknown): SaveRequest {
  return parse(saveSchema, requireJsonBody(body));
}

/** `?limit=` of the history list; absent or empty means the default. */
export function parseListLimit(value: unknown): number {
  return parse(limitSchema, value === '' ? undefined : value, 'limit');
}

/** express.json() leaves the body undefined when the request was not JSON at all. */
function requireJsonBody(body: unknown): unknown {
  if (body === undefined) {
    throw new HttpError(400, 'invalid_request', 'request body must be JSON (send Content-Type: application/json)');
  }
  return body;
}

/** Validate, or throw one 400 whose message lists every problem (each also in `details` by field). */
function parse<T>(schema: z.ZodType<T, unknown>, input: unknown, rootField = 'body'): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details: ErrorDetail[] = result.error.issues.map((issue) => ({
    field: issue.path.join('.') || rootField,
    message: issue.message,
  }));
  throw new HttpError(400, 'invalid_request', details.map((d) => d.message).join('; '), details);
}
