/**
 * The configuration reference (hack/docs/configuration-reference.md) and the tuning knobs
 * (hack/docs/tuning-reference.md), generated from the zod schemas the services parse their environment
 * with: names, defaults and accepted values from each service's schema, descriptions from the comments
 * written beside each variable. A comment tagged `@tuning` marks an algorithm or cache knob: it goes to
 * the tuning page, not to the operator's. `npm run gen-config-docs` writes both; a test keeps the
 * committed pages equal to what this renders.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { z } from 'zod';
import { controlPlaneEnvSchema } from '../images/control-plane/src/config.js';
import { dataPlaneEnvSchema } from '../images/data-plane/src/config.js';
import { gatewayEnvSchema } from '../images/gateway/src/config.js';
import { imageSearchSchema } from '../images/image-search/src/config.js';
import { modelServerEnvSchema } from '../images/model-server/src/config.js';
import { poemAppEnvSchema } from '../images/poem-app/src/config.js';
import { internalIdleEnv } from '../images/object-model/src/internal-api.js';
import { heapGrowthEnvShape } from '../images/service-kit/src/heap-growth.js';
import { allowedHostsEnv } from '../images/service-kit/src/loopback-guard.js';
import { productionEnvShape } from '../images/service-kit/src/production.js';
import { secretsEnv } from '../images/service-kit/src/secrets-env.js';
import { trustProxyEnv } from '../images/service-kit/src/trusted-proxies.js';
import { standaloneEnvSchema } from '../images/standalone/src/config.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CONFIG_REFERENCE_PATH = path.join(root, 'hack/docs/configuration-reference.md');
export const TUNING_REFERENCE_PATH = path.join(root, 'hack/docs/tuning-reference.md');

type Shape = Record<string, z.ZodType>;

/**
 * Each service's schema, where it is declared, and what runs it; `alsoReads`: variables its entrypoint
 * reads outside that schema (through a service-kit helper).
 */
export const CONFIGURED_SERVICES: { name: string; shape: Shape; source: string; runs: string; alsoReads?: Shape }[] = [
  {
    name: 'standalone',
    shape: standaloneEnvSchema.shape,
    source: 'images/standalone/src/config.ts',
    runs: '`npm start`: every service in one process',
    alsoReads: heapGrowthEnvShape,
  },
  { name: 'gateway', shape: gatewayEnvSchema.shape, source: 'images/gateway/src/config.ts', runs: 'the gateway image', alsoReads: heapGrowthEnvShape },
  {
    name: 'data-plane',
    shape: dataPlaneEnvSchema.shape,
    source: 'images/data-plane/src/config.ts',
    runs: 'the data-plane image',
    alsoReads: heapGrowthEnvShape,
  },
  { name: 'control-plane', shape: controlPlaneEnvSchema.shape, source: 'images/control-plane/src/config.ts', runs: 'the control-plane image' },
  { name: 'model-server', shape: modelServerEnvSchema.shape, source: 'images/model-server/src/config.ts', runs: 'the model-server image' },
  { name: 'poem-app', shape: poemAppEnvSchema.shape, source: 'images/poem-app/src/config.ts', runs: 'the poem-app image' },
  { name: 'image-search', shape: imageSearchSchema.shape, source: 'images/image-search/src/config.ts', runs: 'the image-search image (and `npm start`)' },
];

/**
 * Schema pieces services reuse as they are (spread or taken by name), with the file that describes
 * them. A variable without a comment in its service's own file takes the description of the piece it
 * IS (the same zod object, so the same parse), never a comment another service wrote for itself.
 */
const SHARED_PIECES: { shape: Shape; source: string }[] = [
  { shape: secretsEnv, source: 'images/service-kit/src/secrets-env.ts' },
  { shape: productionEnvShape, source: 'images/service-kit/src/production.ts' },
  { shape: allowedHostsEnv, source: 'images/service-kit/src/loopback-guard.ts' },
  { shape: heapGrowthEnvShape, source: 'images/service-kit/src/heap-growth.ts' },
  { shape: trustProxyEnv, source: 'images/service-kit/src/trusted-proxies.ts' },
  { shape: internalIdleEnv, source: 'images/object-model/src/internal-api.ts' },
  { shape: gatewayEnvSchema.shape, source: 'images/gateway/src/config.ts' },
  { shape: dataPlaneEnvSchema.shape, source: 'images/data-plane/src/config.ts' },
];

const VARIABLE = /^[A-Z][A-Z0-9_]*$/;
const TUNING_TAG = /\s*@tuning\b\s*/;

/** Variables every service reads alike, described here when a service does not describe them itself. */
const CONVENTIONAL: Record<string, string> = {
  PORT: 'TCP port to listen on.',
  LOG_LEVEL: 'Least severe level written to the log (JSON lines; readable lines in a terminal).',
};

export interface Described {
  words: string;
  tuning: boolean;
  /** The file (or `conventional`) the words come from. */
  from: string;
}

const commentsByFile = new Map<string, Map<string, Described>>();

/** The comment written right above each `NAME: ...` property of a source file (JSDoc or line comments). */
function describedVariables(file: string): Map<string, Described> {
  const cached = commentsByFile.get(file);
  if (cached) return cached;
  const text = readFileSync(path.join(root, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = new Map<string, Described>();
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name) && VARIABLE.test(node.name.text)) {
      const comments = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
      const raw = comments
        .map((c) => text.slice(c.pos, c.end))
        .map((c) => c.replace(/^\/\*\*?|\*\/$/g, '').replace(/^\s*(\/\/|\*)\s?/gm, ''))
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim();
      const words = raw.replace(TUNING_TAG, ' ').trim();
      if (words && !found.has(node.name.text)) found.set(node.name.text, { words, tuning: TUNING_TAG.test(raw), from: file });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  commentsByFile.set(file, found);
  return found;
}

/** How one service's variable is described: its own file's comment, else the shared piece it is, else the convention. */
export function describe(service: { source: string }, name: string, schema: z.ZodType, alsoFrom?: string): Described | undefined {
  const own = describedVariables(service.source).get(name) ?? (alsoFrom ? describedVariables(alsoFrom).get(name) : undefined);
  if (own) return own;
  for (const piece of SHARED_PIECES) {
    if (piece.source !== service.source && piece.shape[name] === schema) {
      const shared = describedVariables(piece.source).get(name);
      if (shared) return shared;
    }
  }
  const conventional = CONVENTIONAL[name];
  return conventional ? { words: conventional, tuning: false, from: 'conventional' } : undefined;
}

interface JsonProperty {
  default?: unknown;
  type?: string;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  format?: string;
  pattern?: string;
}

/** What a value may be, in words, from the JSON Schema of the variable's input. */
function accepted(p: JsonProperty): string {
  if (p.enum) return p.enum.map((v) => `\`${String(v)}\``).join(', ');
  const parts: string[] = [];
  if (p.type === 'integer' || p.type === 'number') {
    parts.push(p.type === 'integer' ? 'integer' : 'number');
    if (p.minimum !== undefined && p.maximum !== undefined && p.maximum < Number.MAX_SAFE_INTEGER) parts.push(`${p.minimum}–${p.maximum}`);
    else if (p.minimum !== undefined) parts.push(`≥ ${p.minimum}`);
  } else if (p.format === 'uri') parts.push('URL');
  else if (p.minLength) parts.push(`at least ${p.minLength} characters`);
  return parts.join(' ');
}

const cell = (s: string) => s.replace(/\|/g, '\\|');

function renderDefault(p: JsonProperty, required: boolean): string {
  if (required) return '**required**';
  if (p.default === undefined || p.default === '') return 'unset';
  return `\`${cell(String(p.default))}\``;
}

/** One table row per variable of a service, each marked as a tuning knob or not. */
export function serviceRows(service: (typeof CONFIGURED_SERVICES)[number]): { name: string; row: string; tuning: boolean }[] {
  const rows: { name: string; row: string; tuning: boolean }[] = [];
  const add = (shape: Shape, alsoFrom?: string) => {
    const schema = z.toJSONSchema(z.object(shape), { io: 'input', unrepresentable: 'any' }) as {
      properties: Record<string, JsonProperty>;
      required?: string[];
    };
    const required = new Set(schema.required ?? []);
    for (const [name, p] of Object.entries(schema.properties)) {
      const described = describe(service, name, shape[name]!, alsoFrom);
      const row = `| \`${name}\` | ${renderDefault(p, required.has(name))} | ${cell(accepted(p))} | ${cell(described?.words ?? '')} |`;
      rows.push({ name, row, tuning: described?.tuning ?? false });
    }
  };
  add(service.shape);
  if (service.alsoReads) add(service.alsoReads, SHARED_PIECES.find((p) => p.shape === service.alsoReads)?.source);
  return rows;
}

const TABLE_HEAD = ['| variable | default | accepts | what it sets |', '|---|---|---|---|'];

function renderPage(head: string[], tuning: boolean): string {
  const lines = [...head];
  for (const service of CONFIGURED_SERVICES) {
    const rows = serviceRows(service).filter((r) => r.tuning === tuning);
    if (!rows.length) continue;
    lines.push(`## ${service.name}`, '', `Read by ${service.runs} (\`${service.source}\`).`, '');
    lines.push(...TABLE_HEAD, ...rows.map((r) => r.row), '');
  }
  return lines.join('\n');
}

export function renderConfigReference(): string {
  return renderPage(
    [
      '# Configuration reference',
      '',
      'Every environment variable each service reads that an operator sets, generated from the zod schemas',
      'it parses them with (`npm run gen-config-docs`; a test keeps this page in sync). A service refuses to',
      'start with a message naming every bad variable. Algorithm and cache knobs, which the defaults suit,',
      'are listed apart: [tuning-reference.md](tuning-reference.md). How the embedded platform keeps its',
      'state: [configuration.md](configuration.md).',
      '',
    ],
    false,
  );
}

export function renderTuningReference(): string {
  return renderPage(
    [
      '# Tuning knobs',
      '',
      'Algorithm and cache settings each service reads besides its [configuration](configuration-reference.md):',
      'the defaults are measured ones, change them only against a measurement (hack/bench). Generated with',
      'the configuration reference (`npm run gen-config-docs`), from the variables whose comment says `@tuning`.',
      '',
    ],
    true,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_REFERENCE_PATH, renderConfigReference());
  writeFileSync(TUNING_REFERENCE_PATH, renderTuningReference());
  console.log(`wrote ${path.relative(root, CONFIG_REFERENCE_PATH)} and ${path.relative(root, TUNING_REFERENCE_PATH)}`);
}
