import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BpeTokenizer, type BpeTokenizerFile } from './bpe-tokenizer.js';
import { MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MODEL_DIMS } from './model-spec.js';
import { ID_TOKENIZER, type ModelTokenizer } from './tokenizer.js';

/** The trained strata-tiny committed with the image (the built-in models live under it). */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../model', import.meta.url));

/** One set of weights and the names it answers to. */
export interface ModelSource {
  names: string[];
  /** Folder with encoder.onnx, decoder.onnx and, for a text model, tokenizer.json. */
  dir: string;
}

/**
 * The built-in models, in the order /v1/models lists them: strata-verse answers text (verse, through
 * its own BPE tokenizer), strata-tiny answers content ids (its contract: the ids joined by spaces).
 * The text model comes first because OpenAI-compatible clients that are not told a model take the
 * first one listed, and only a text model is of use to them.
 */
export const BUILT_IN_MODELS: readonly ModelSource[] = [
  { names: ['strata-verse'], dir: path.join(DEFAULT_MODEL_DIR, 'strata-verse') },
  { names: ['strata-tiny'], dir: DEFAULT_MODEL_DIR },
];

/** The built-in model a name belongs to, if any. */
export function builtInModelNamed(name: string): ModelSource | undefined {
  return BUILT_IN_MODELS.find((m) => m.names.includes(name));
}

/**
 * What a server configured with MODEL_DIR / MODEL_NAMES serves. A built-in model's name only ever
 * loads that model's own weights: names alone must be built-in ones (each serves its own folder), and
 * a MODEL_DIR may not answer to a built-in name unless it is that model's folder. A MODEL_DIR without
 * names answers to its built-in name, else to the path as given (as vLLM's default served name).
 */
export function configuredModelSources(modelDir: string | undefined, modelNames: readonly string[] | undefined): ModelSource[] {
  const names = modelNames?.length ? [...modelNames] : undefined;
  if (!modelDir && !names) return BUILT_IN_MODELS.map((m) => ({ names: [...m.names], dir: m.dir }));
  const builtInNames = BUILT_IN_MODELS.flatMap((m) => m.names).join(', ');
  if (!modelDir) {
    const unknown = names!.filter((n) => !builtInModelNamed(n));
    if (unknown.length > 0) {
      throw new Error(`MODEL_NAMES ${unknown.join(', ')}: not a built-in model (${builtInNames}); set MODEL_DIR to the folder of its weights`);
    }
    // One source per built-in model named, in the order first named.
    const sources: ModelSource[] = [];
    for (const name of names!) {
      const dir = builtInModelNamed(name)!.dir;
      const source = sources.find((s) => s.dir === dir);
      if (source) source.names.push(name);
      else sources.push({ names: [name], dir });
    }
    return sources;
  }
  const own = BUILT_IN_MODELS.find((m) => path.resolve(m.dir) === path.resolve(modelDir));
  const served = names ?? (own ? [...own.names] : [modelDir]);
  for (const name of served) {
    const builtIn = builtInModelNamed(name);
    if (builtIn && path.resolve(builtIn.dir) !== path.resolve(modelDir)) {
      throw new Error(`model name ${name} is the built-in model's and serves only its weights, not those in MODEL_DIR ${modelDir}; choose another name`);
    }
  }
  return [{ names: served, dir: modelDir }];
}

/** A folder's tokenizer: its tokenizer.json (BPE) when there is one, else strata-tiny's id tokenizer. */
export async function loadTokenizer(dir: string): Promise<ModelTokenizer> {
  let text: string;
  try {
    text = await readFile(path.join(dir, 'tokenizer.json'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return ID_TOKENIZER;
    throw err;
  }
  return new BpeTokenizer(JSON.parse(text) as BpeTokenizerFile);
}

/** Sampling for a request that leaves temperature or top_p out. */
export interface SamplingDefaults {
  temperature: number;
  topP: number;
}

/** OpenAI's defaults, for a model that states none. */
export const OPENAI_SAMPLING: SamplingDefaults = { temperature: 1, topP: 1 };

/** The file a model folder states its own sampling defaults in (Hugging Face's name; vLLM reads it too). */
export const GENERATION_CONFIG_FILE = 'generation_config.json';

const generationConfig = z.object({
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
});

/**
 * A folder's sampling defaults: its generation_config.json's temperature and top_p (what its model
 * reads best with), OpenAI's for what the file leaves out or when there is none.
 */
export async function loadSamplingDefaults(dir: string): Promise<SamplingDefaults> {
  const file = path.join(dir, GENERATION_CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return OPENAI_SAMPLING;
    throw err;
  }
  const parsed = generationConfig.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return { temperature: parsed.data.temperature ?? OPENAI_SAMPLING.temperature, topP: parsed.data.top_p ?? OPENAI_SAMPLING.topP };
}

/**
 * A /v1/models entry. Beside OpenAI's fields, the context as vLLM states it (`max_model_len`: prompt
 * and answer positions together) and each part's own limit, so that clients can size `max_tokens`.
 */
export function modelObject(id: string, created: number) {
  return {
    id,
    object: 'model',
    created,
    owned_by: 'strata',
    max_model_len: MODEL_DIMS.maxPositions,
    maxPromptTokens: MAX_PROMPT_TOKENS,
    maxOutputTokens: MAX_OUTPUT_TOKENS,
  };
}
