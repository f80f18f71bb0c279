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
 * The poem in its form's shape, from at least lineCountOf(type, theme) lines of verse: the first that
 * many, stanzas set apart by a blank line. When none of them names the theme, the first line is
 * opened with it ("Autumn rain — …"), so the theme is always in the poem, in its first line.
 */
export function shapePoem(lines: readonly string[], type: PoemType, theme: string): string {
  const stanzas = stanzasOf(type, theme);
  const count = stanzas.reduce((a, b) => a + b, 0);
  if (lines.length < count) throw new Error(`a ${type.label.toLowerCase()} needs ${count} lines, got ${lines.length}`);
  const poem = lines.slice(0, count);
  if (!containsTheme(poem.join('\n'), theme)) poem[0] = `${theme.charAt(0).toUpperCase()}${theme.slice(1)} — ${poem[0]}`;
  const out: string[] = [];
  let at = 0;
  for (const size of stanzas) {
    out.push(poem.slice(at, at + size).join('\n'));
    at += size;
  }
  return out.join('\n\n');
}
