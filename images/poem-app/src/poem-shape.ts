import type { PoemType } from './poem-types.js';

/** Fewest and most lines of an acrostic (one line per letter of its theme). */
export const ACROSTIC_MIN_LINES = 3;
export const ACROSTIC_MAX_LINES = 20;

/**
 * The stanzas a poem of this form on this theme has: the form's own, or for an acrostic one stanza
 * of a line per letter of the theme (within ACROSTIC_MIN_LINES..ACROSTIC_MAX_LINES).
 */
export function stanzasOf(type: PoemType, theme: string): number[] {
  if (type.stanzas.length > 0) return [...type.stanzas];
  const letters = [...theme].filter((c) => /\p{L}/u.test(c)).length;
  return [Math.min(ACROSTIC_MAX_LINES, Math.max(ACROSTIC_MIN_LINES, letters))];
}

/** How many non-empty lines a poem of this form on this theme has. */
export function lineCountOf(type: PoemType, theme: string): number {
  return stanzasOf(type, theme).reduce((a, b) => a + b, 0);
}

/**
 * The lines of verse in an upstream answer: trimmed, without control characters, Markdown emphasis
 * or heading marks, and without blank lines or lines with no letter or digit (separators, stray symbols).
 */
export function verseLines(text: string): string[] {
  return text
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) =>
      line
        .replace(/\p{Cc}/gu, '')
        .replace(/^\s*#+\s+/, '')
        .replace(/\*\*|__/g, '')
        .trim(),
    )
    .filter((line) => /[\p{L}\p{N}]/u.test(line));
}

/** Lowercase, whitespace runs as one space: how lines and themes are compared. */
function normalized(text: string): string {
  return text.toLowerCase().replace(/\s+/g, ' ').trim();
}

/** Whether the theme occurs in the text as whole words (case-insensitive): "love" in "my love", not in "glove". */
export function containsTheme(text: string, theme: string): boolean {
  const words = normalized(theme);
  if (!words) return true;
  const escaped = words.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/ /g, '\\s+');
  return new RegExp(`(?<![\\p{L}\\p{N}])${escaped}(?![\\p{L}\\p{N}])`, 'u').test(text.toLowerCase());
}

/** Lines from `more` that are not already among `lines` (compared normalized), appended in order. */
export function addNewLines(lines: string[], more: readonly string[]): string[] {
  const seen = new Set(lines.map(normalized));
  for (const line of more) {
    const key = normalized(line);
    if (seen.has(key)) continue;
    seen.add(key);
    lines.push(line);
  }
  return lines;
}

/**
 * Words that can open a line of English verse, one per letter: an acrostic line the upstream did not
 * begin with its letter is opened with one ("Still the tide turns"), as a missing theme opens the first
 * line. A letter without one (beyond a–z) opens the line itself.
 */
const LINE_OPENERS: Readonly<Record<string, string>> = {
  a: 'And',
  b: 'Beneath',
  c: 'Come',
  d: 'Deep',
  e: 'Even',
  f: 'For',
  g: 'Gently',
  h: 'How',
  i: 'In',
  j: 'Just',
  k: 'Kindly',
  l: 'Long',
  m: 'More',
  n: 'Now',
  o: 'Over',
  p: 'Past',
  q: 'Quietly',
  r: 'Rising',
  s: 'Still',
  t: 'Through',
  u: 'Under',
  v: 'Very',
  w: 'When',
  x: 'Xanthic',
  y: 'Yet',
  z: 'Zealous',
};

/** The letters an acrostic's lines begin with, in order: its theme's letters, one a line (none for other forms). */
export function acrosticLetters(type: PoemType, theme: string): string[] {
  if (type.stanzas.length > 0) return [];
  return [...theme].filter((c) => /\p{L}/u.test(c)).slice(0, lineCountOf(type, theme));
}

/** The first letter of a line (after any quote or punctuation), lowercase. */
function firstLetter(line: string): string | undefined {
  return /\p{L}/u.exec(line)?.[0].toLowerCase();
}

/** A line opened with a word that begins with `letter`. */
function openWith(letter: string, line: string): string {
  const opener = LINE_OPENERS[letter.toLowerCase()] ?? letter.toUpperCase();
  return `${opener} ${line.charAt(0).toLowerCase()}${line.slice(1)}`;
}

/**
 * The lines of the poem, lineCountOf(type, theme) of them, from at least that many lines of verse: the
 * first ones in order; for an acrostic, each position takes a line that begins with its letter (from
 * all the lines given), and a position none fits takes the next line left, opened with a word of its letter.
 */
export function arrangeLines(lines: readonly string[], type: PoemType, theme: string): string[] {
  const count = lineCountOf(type, theme);
  if (lines.length < count) throw new Error(`a ${type.label.toLowerCase()} needs ${count} lines, got ${lines.length}`);
  const letters = acrosticLetters(type, theme);
  if (letters.length === 0) return lines.slice(0, count);
  const left = [...lines];
  const chosen: Array<string | undefined> = Array.from({ length: count }, (_, i) => {
    const letter = letters[i]?.toLowerCase();
    const at = letter === undefined ? -1 : left.findIndex((line) => firstLetter(line) === letter);
    return at < 0 ? undefined : left.splice(at, 1)[0];
  });
  return chosen.map((line, i) => {
    if (line !== undefined) return line;
    const next = left.shift()!;
    const letter = letters[i];
    return letter === undefined ? next : openWith(letter, next);
  });
}

/**
 * The poem in its form's shape, from at least lineCountOf(type, theme) lines of verse: arranged
 * (arrangeLines), stanzas set apart by a blank line. When none of them names the theme, the first line
 * is opened with it ("Autumn rain — …"), so the theme is always in the poem, in its first line (an
 * acrostic's first letter is the theme's, so it still spells the theme).
 */
export function shapePoem(lines: readonly string[], type: PoemType, theme: string): string {
  const stanzas = stanzasOf(type, theme);
  const poem = arrangeLines(lines, type, theme);
  if (!containsTheme(poem.join('\n'), theme)) poem[0] = `${theme.charAt(0).toUpperCase()}${theme.slice(1)} — ${poem[0]}`;
  const out: string[] = [];
  let at = 0;
  for (const size of stanzas) {
    out.push(poem.slice(at, at + size).join('\n'));
    at += size;
  }
  return out.join('\n\n');
}
