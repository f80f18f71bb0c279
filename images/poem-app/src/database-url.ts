import { fileURLToPath } from 'node:url';

/**
 * Turn DATABASE_URL into a path better-sqlite3 can open. Accepted: `file:./rel.db`, `file:/abs.db`,
 * `file:///abs.db`, `sqlite:./rel.db`, a plain path, or `:memory:`. Query strings (`?mode=rwc`) are ignored.
 * Anything with another scheme (postgres://...) is refused, because this app only speaks SQLite.
 */
export function parseDatabaseUrl(url: string): string {
  const value = url.trim();
  if (value === '') throw new Error('DATABASE_URL is empty; use e.g. file:./data/poems.db');
  if (value === ':memory:') return value;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
  // One-letter "schemes" are Windows drive letters of plain paths.
  if (!scheme || scheme.length === 1) return value;
  if (scheme !== 'file' && scheme !== 'sqlite') {
    throw new Error(`unsupported DATABASE_URL scheme "${scheme}:"; the poem app uses an SQLite file (e.g. file:./data/poems.db)`);
  }
  const rest = value.slice(scheme.length + 1).replace(/[?#].*$/, '');
  const path = rest.startsWith('//') ? fileURLToPath(`file:${rest}`) : decodeURIComponent(rest);
  if (path === '') throw new Error('DATABASE_URL has no path; use e.g. file:./data/poems.db');
  return path;
}
