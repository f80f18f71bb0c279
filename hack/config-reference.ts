/**
 * The configuration reference (hack/docs/configuration-reference.md), generated from the zod schemas
 * the services parse their environment with: names, defaults and accepted values from the schemas,
 * descriptions from the comments written beside each variable. `npm run gen-config-docs` writes it;
 * a test keeps the committed page equal to what this renders.
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
import { standaloneEnvSchema } from '../images/standalone/src/config.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CONFIG_REFERENCE_PATH = path.join(root, 'hack/docs/configuration-reference.md');

type EnvSchema = z.ZodObject<z.ZodRawShape>;

/** Each service's schema, where it is declared, and what runs it. */
export const CONFIGURED_SERVICES: { name: string; schema: EnvSchema; source: string; runs: string }[] = [
  { name: 'standalone', schema: standaloneEnvSchema, source: 'images/standalone/src/config.ts', runs: '`npm start`: every service in one process' },
  { name: 'gateway', schema: gatewayEnvSchema, source: 'images/gateway/src/config.ts', runs: 'the gateway image' },
  { name: 'data-plane', schema: dataPlaneEnvSchema, source: 'images/data-plane/src/config.ts', runs: 'the data-plane image' },
  { name: 'control-plane', schema: controlPlaneEnvSchema, source: 'images/control-plane/src/config.ts', runs: 'the control-plane image' },
  { name: 'model-server', schema: modelServerEnvSchema, source: 'images/model-server/src/config.ts', runs: 'the model-server image' },
  { name: 'poem-app', schema: poemAppEnvSchema, source: 'images/poem-app/src/config.ts', runs: 'the poem-app image' },
  { name: 'image-search', schema: imageSearchSchema, source: 'images/image-search/src/config.ts', runs: 'the image-search image (and `npm start`)' },
];

/** Files whose variable comments describe variables other schemas take over (spread or reused). */
const SHARED_SOURCES = ['images/service-kit/src/production.ts', 'images/service-kit/src/heap-growth.ts', 'images/service-kit/src/loopback-guard.ts'];

const VARIABLE = /^[A-Z][A-Z0-9_]*$/;

/** Variables every service reads alike, described once here. */
const CONVENTIONAL: Record<string, string> = {
  PORT: 'TCP port to listen on.',
  LOG_LEVEL: 'Least severe level written to the log (JSON lines; readable lines in a terminal).',
};

/** The comment written right above each `NAME: ...` property of a source file (JSDoc or line comments). */
function describedVariables(file: string): Map<string, string> {
  const text = readFileSync(path.join(root, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found = new Map<string, string>();
  const visit = (node: ts.Node) => {
    if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name) && VARIABLE.test(node.name.text)) {
      const comments = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
      const words = comments
        .map((c) => text.slice(c.pos, c.end))
        .map((c) => c.replace(/^\/\*\*?|\*\/$/g, '').replace(/^\s*(\/\/|\*)\s?/gm, ''))
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim();
      if (words && !found.has(node.name.text)) found.set(node.name.text, words);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
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

export function renderConfigReference(): string {
  const descriptions = new Map<string, string>(Object.entries(CONVENTIONAL));
  for (const file of [...CONFIGURED_SERVICES.map((s) => s.source), ...SHARED_SOURCES]) {
    for (const [name, words] of describedVariables(file)) if (!descriptions.has(name)) descriptions.set(name, words);
  }
  const lines = [
    '# Configuration reference',
    '',
    'Every environment variable each service reads, generated from the zod schemas it parses them with',
    '(`npm run gen-config-docs`; a test keeps this page in sync). A service refuses to start with a',
    'message naming every bad variable. How the embedded platform keeps its state: [configuration.md](configuration.md).',
    '',
  ];
  for (const service of CONFIGURED_SERVICES) {
    const schema = z.toJSONSchema(service.schema, { io: 'input', unrepresentable: 'any' }) as {
      properties: Record<string, JsonProperty>;
      required?: string[];
    };
    const required = new Set(schema.required ?? []);
    lines.push(`## ${service.name}`, '', `Read by ${service.runs} (\`${service.source}\`).`, '');
    lines.push('| variable | default | accepts | what it sets |', '|---|---|---|---|');
    for (const [name, p] of Object.entries(schema.properties)) {
      const words = descriptions.get(name) ?? '';
      lines.push(`| \`${name}\` | ${renderDefault(p, required.has(name))} | ${cell(accepted(p))} | ${cell(words)} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_REFERENCE_PATH, renderConfigReference());
  console.log(`wrote ${path.relative(root, CONFIG_REFERENCE_PATH)}`);
}
