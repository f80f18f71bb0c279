/**
 * Measures the poems the poem app writes with the platform's own model server and strata-verse: every
 * form on five themes (8 × 5 = 40 poems), through the poem app's Poet, as a visitor gets them.
 * Reported in the strata-verse model card (`poemApp`) and the model server's README.
 *
 *   npx tsx hack/bench/poem-shape.ts        # prints the report as JSON
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startModelServer } from '../../images/model-server/src/app.js';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/served-models.js';
import { loadPoemAppConfig } from '../../images/poem-app/src/config.js';
import { containsTheme, lineCountOf, verseLines } from '../../images/poem-app/src/poem-shape.js';
import { POEM_TYPES } from '../../images/poem-app/src/poem-types.js';
import { Poet } from '../../images/poem-app/src/poet.js';
import { createLogger } from '../../images/service-kit/src/index.js';
import { verseWords } from '../train/verse-corpus.js';

export const MEASURED_THEMES = ['the sea', 'autumn rain', 'love', 'the night sky', 'a city at dawn'];

export interface MeasuredPoem {
  form: string;
  theme: string;
  poem: string;
  lineCount: number;
  expectedLines: number;
  themePresent: boolean;
  /** The model's own lines named the theme (the poem app did not have to open the first line with it). */
  themeByModel: boolean;
  firstAnswerLines: number;
  requests: number;
}

export interface PoemShapeReport {
  poems: number;
  linesRight: number;
  themePresent: number;
  themeByModel: number;
  /** First answers that already had the form's line count (before follow-ups and trimming). */
  firstAnswerLinesRight: number;
  meanFirstAnswerLines: number;
  meanRequests: number;
  /** Share of the model's words (the theme the app added left out) that are words of its corpus. */
  corpusWordShare: number;
}

/** Every form on every theme through `poet`, one after another. */
export async function writeMeasuredPoems(poet: Poet, themes: readonly string[] = MEASURED_THEMES): Promise<MeasuredPoem[]> {
  const poems: MeasuredPoem[] = [];
  for (const type of POEM_TYPES) {
    for (const theme of themes) {
      const written = await poet.write(type, theme);
      poems.push({
        form: type.code,
        theme,
        poem: written.poem,
        lineCount: verseLines(written.poem).length,
        expectedLines: lineCountOf(type, theme),
        themePresent: containsTheme(written.poem, theme),
        themeByModel: !written.themeAdded,
        firstAnswerLines: written.firstAnswerLines,
        requests: written.requests,
      });
    }
  }
  return poems;
}

export function summarize(poems: readonly MeasuredPoem[], corpusWords: ReadonlySet<string>): PoemShapeReport {
  const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  // The model's words: the poem without the theme the app put before its first line.
  const words = poems.flatMap((p) => verseWords(p.themeByModel ? p.poem : p.poem.slice(p.poem.indexOf(' — ') + 3)));
  return {
    poems: poems.length,
    linesRight: poems.filter((p) => p.lineCount === p.expectedLines).length,
    themePresent: poems.filter((p) => p.themePresent).length,
    themeByModel: poems.filter((p) => p.themeByModel).length,
    firstAnswerLinesRight: poems.filter((p) => p.firstAnswerLines >= p.expectedLines).length,
    meanFirstAnswerLines: round(mean(poems.map((p) => p.firstAnswerLines)), 2),
    meanRequests: round(mean(poems.map((p) => p.requests)), 2),
    corpusWordShare: round(words.filter((w) => corpusWords.has(w)).length / words.length),
  };
}

export function verseCorpusWords(): Set<string> {
  return new Set(
    readFileSync(path.join(DEFAULT_MODEL_DIR, 'strata-verse', 'corpus-words.txt'), 'utf8')
      .split('\n')
      .filter(Boolean),
  );
}

async function main(): Promise<void> {
  const server = await startModelServer({ port: 0, host: '127.0.0.1', truncatePrompt: true, logger: createLogger('model-server', 'silent') });
  try {
    const poet = new Poet(loadPoemAppConfig({ API_BASE_URL: `${server.url}/v1`, API_MODEL: 'strata-verse' }).upstream);
    const poems = await writeMeasuredPoems(poet);
    process.stdout.write(`${JSON.stringify({ report: summarize(poems, verseCorpusWords()), examples: poems.slice(0, 3) }, null, 2)}\n`);
  } finally {
    await server.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
