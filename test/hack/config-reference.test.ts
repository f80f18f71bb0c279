import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import {
  CONFIG_REFERENCE_PATH,
  CONFIGURED_SERVICES,
  renderConfigReference,
  renderTuningReference,
  TUNING_REFERENCE_PATH,
} from '../../hack/config-reference.js';
import { secretsEnv } from '../../images/service-kit/src/secrets-env.js';

const root = path.resolve(path.dirname(CONFIG_REFERENCE_PATH), '../..');

/** The `| name | default | accepts | words |` row of `name` in a service's section of a page, split into cells. */
function row(page: string, service: string, name: string): string[] | undefined {
  const section = page.split(`\n## ${service}\n`)[1]?.split('\n## ')[0] ?? '';
  const line = section.split('\n').find((l) => l.startsWith(`| \`${name}\` |`));
  return line?.split(/(?<!\\)\|/).map((c) => c.trim());
}

/** The words of the comment right above `NAME:` in a source file, as the file's author wrote them there. */
function ownComment(file: string, name: string): string | undefined {
  const text = readFileSync(path.join(root, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  let words: string | undefined;
  const visit = (node: ts.Node) => {
    if (words === undefined && ts.isPropertyAssignment(node) && ts.isIdentifier(node.name) && node.name.text === name) {
      const comments = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
      const raw = comments
        .map((c) =>
          text
            .slice(c.pos, c.end)
            .replace(/^\/\*\*?|\*\/$/g, '')
            .replace(/^\s*(\/\/|\*)\s?/gm, ''),
        )
        .join(' ');
      words =
        raw
          .replace(/@tuning/g, ' ')
          .replace(/\s+/g, ' ')
          .trim() || undefined;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return words;
}

describe('configuration reference (hack/docs/configuration-reference.md, tuning-reference.md)', function () {
  this.timeout(60_000);
  const page = renderConfigReference();
  const tuning = renderTuningReference();

  it('is what the zod schemas render (run `npm run gen-config-docs` after changing one)', () => {
    expect(readFileSync(CONFIG_REFERENCE_PATH, 'utf8')).to.equal(page);
    expect(readFileSync(TUNING_REFERENCE_PATH, 'utf8')).to.equal(tuning);
  });

  it('lists every variable of every service on exactly one of the two pages, each with its default and a description', () => {
    for (const service of CONFIGURED_SERVICES) {
      for (const name of Object.keys(service.shape)) {
        const rows = [row(page, service.name, name), row(tuning, service.name, name)].filter(Boolean);
        expect(rows, `${service.name}: ${name}`).to.have.length(1);
        const [, , fallback, , words] = rows[0]!;
        expect(fallback, `${service.name}: ${name} default`).to.not.equal('');
        expect(words, `${service.name}: ${name} description`).to.not.equal('');
      }
    }
  });

  it("describes each service's variable in that service's words, never in another service's", () => {
    for (const service of CONFIGURED_SERVICES) {
      for (const [name, schema] of Object.entries(service.shape)) {
        const words = (row(page, service.name, name) ?? row(tuning, service.name, name))![4]!;
        const own = ownComment(service.source, name);
        if (own) {
          expect(words, `${service.name}: ${name}`).to.equal(own.replace(/\|/g, '\\|'));
          continue;
        }
        // No comment of its own: the words may be another service's only where the variable IS that service's (the same parser).
        for (const other of CONFIGURED_SERVICES.filter((o) => o !== service)) {
          if (ownComment(other.source, name) === words.replace(/\\\|/g, '|'))
            expect(other.shape[name], `${service.name}: ${name} (${other.name}'s words)`).to.equal(schema);
        }
      }
    }
  });

  it('never describes a required variable as one that may be left unset', () => {
    for (const service of CONFIGURED_SERVICES) {
      for (const name of Object.keys(service.shape)) {
        const [, , fallback, , words] = (row(page, service.name, name) ?? row(tuning, service.name, name))!;
        if (fallback === '**required**') expect(words, `${service.name}: ${name}`).to.not.match(/\bunset\b|\bgenerated\b|\bdefault\b/i);
      }
    }
    expect(row(page, 'data-plane', 'STRATA_INTERNAL_TOKEN')![2]).to.equal('**required**');
    expect(row(page, 'gateway', 'STRATA_REDIS_NODES')![4]).to.match(/rate-limit/);
    expect(row(page, 'data-plane', 'STRATA_REDIS_NODES')![4]).to.not.match(/rate-limit/);
  });

  it('asks the same minimum of each shared secret in every service that reads it', () => {
    for (const [name, shared] of Object.entries(secretsEnv)) {
      if (typeof (shared as { minLength?: unknown }).minLength !== 'number') {
        // A key of a fixed form (SSE's key-encryption key: 32 bytes in base64): every service takes and refuses the same values.
        for (const service of CONFIGURED_SERVICES.filter((s) => name in s.shape)) {
          const schema = service.shape[name]!;
          expect(schema.safeParse(randomBytes(32).toString('base64')).success, `${service.name}: ${name} of 32 bytes`).to.equal(true);
          expect(schema.safeParse(randomBytes(16).toString('base64')).success, `${service.name}: ${name} of 16 bytes`).to.equal(false);
        }
        continue;
      }
      const min = (shared.minLength ?? 0) as number;
      expect(min, name).to.be.at.least(16);
      for (const service of CONFIGURED_SERVICES.filter((s) => name in s.shape)) {
        const schema = service.shape[name]!;
        expect(schema.safeParse('k'.repeat(min - 1)).success, `${service.name}: ${name} shorter than ${min}`).to.equal(false);
        expect(schema.safeParse('k'.repeat(min)).success, `${service.name}: ${name} of ${min}`).to.equal(true);
        expect(row(page, service.name, name)![3], `${service.name}: ${name}`).to.equal(`at least ${min} characters`);
      }
    }
  });

  it('keeps algorithm and cache knobs off the operator page, on the tuning page', () => {
    for (const [service, name] of [
      ['image-search', 'IMAGE_SEARCH_TRAIN_PQ_POINTS'],
      ['image-search', 'IMAGE_SEARCH_NPROBE'],
      ['model-server', 'MODEL_SERVER_ADMISSION_WAVE'],
      ['data-plane', 'STRATA_SMALL_BLOB_CACHE_MB'],
      ['gateway', 'STRATA_HEAP_GROWING_PERCENT'],
    ] as const) {
      expect(row(page, service, name), `${service}: ${name} on the operator page`).to.equal(undefined);
      expect(row(tuning, service, name), `${service}: ${name} on the tuning page`).to.be.an('array');
    }
    const rows = (p: string) => p.split('\n').filter((l) => l.startsWith('| `'));
    expect([...rows(page), ...rows(tuning)].join('\n')).to.not.contain('@tuning');
  });

  it('tells required variables, defaults and unset apart as the schemas do', () => {
    const gateway = page.split('## gateway\n')[1]!;
    expect(gateway).to.match(/\| `STRATA_JWT_SECRET` \| \*\*required\*\* \| at least 32 characters \|/);
    expect(gateway).to.match(/\| `STRATA_GATEWAY_PORT` \| `9000` \| integer 0–65535 \|/);
    expect(gateway).to.match(/\| `STRATA_PUBLIC_URL` \| unset \| URL \|/);
  });
});
