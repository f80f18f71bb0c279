import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export interface Poem {
  id: number;
  /** The poem type's label, e.g. "Sonnet". */
  type: string;
  theme: string;
  content: string;
  /** The model that wrote it; null for poems saved without one (and all saved before it was kept). */
  model: string | null;
  /** ISO 8601, UTC, millisecond precision. */
  createdAt: string;
}

export type NewPoem = Pick<Poem, 'type' | 'theme' | 'content'> & { model?: string | null };

interface PoemRow {
  id: number;
  type: string;
  theme: string;
  content: string;
  model: string | null;
  created_at: string;
}

/**
 * Versioned schema steps, applied in order on open; PRAGMA user_version records how many ran.
 * Append new steps, never edit old ones: existing databases have already applied them.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE poems (
     id         INTEGER PRIMARY KEY AUTOINCREMENT,
     type       TEXT NOT NULL,
     theme      TEXT NOT NULL,
     content    TEXT NOT NULL,
     created_at TEXT NOT NULL
   );
   CREATE INDEX poems_newest_first ON poems (created_at DESC, id DESC);`,
  // The model that wrote each poem; rows saved before this step have none (NULL).
  `ALTER TABLE poems ADD COLUMN model TEXT;`,
];

/** Saved poems in an embedded SQLite file (better-sqlite3). Calls are synchronous and short. */
export class PoemStore {
  private readonly db: Database.Database;

  private constructor(db: Database.Database) {
    this.db = db;
  }

  /** Open (creating the file and its folder if needed) and migrate to the latest schema. */
  static open(databasePath: string): PoemStore {
    if (databasePath !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(databasePath)), { recursive: true });
    const db = new Database(databasePath);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('busy_timeout = 5000');
      migrate(db);
    } catch (err) {
      db.close();
      throw err;
    }
    return new PoemStore(db);
  }

  add(poem: NewPoem, now: Date = new Date()): Poem {
    const createdAt = now.toISOString();
    const model = poem.model ?? null;
    const result = this.db
      .prepare('INSERT INTO poems (type, theme, content, model, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(poem.type, poem.theme, poem.content, model, createdAt);
    return { id: Number(result.lastInsertRowid), type: poem.type, theme: poem.theme, content: poem.content, model, createdAt };
  }

  get(id: number): Poem | undefined {
    const row = this.db.prepare('SELECT id, type, theme, content, model, created_at FROM poems WHERE id = ?').get(id) as PoemRow | undefined;
    return row && toPoem(row);
  }

  /** Newest first; ties on the timestamp fall back to insertion order. */
  list(limit: number): Poem[] {
    const rows = this.db
      .prepare('SELECT id, type, theme, content, model, created_at FROM poems ORDER BY created_at DESC, id DESC LIMIT ?')
      .all(limit) as PoemRow[];
    return rows.map(toPoem);
  }

  /** Delete one poem; false when there was none with that id. */
  remove(id: number): boolean {
    return this.db.prepare('DELETE FROM poems WHERE id = ?').run(id).changes > 0;
  }

  /** Throws when the database is closed or unreadable (used by /readyz). */
  ping(): void {
    this.db.prepare('SELECT 1').get();
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

function toPoem(r: PoemRow): Poem {
  return { id: r.id, type: r.type, theme: r.theme, content: r.content, model: r.model, createdAt: r.created_at };
}

function migrate(db: Database.Database): void {
  const applied = db.pragma('user_version', { simple: true }) as number;
  if (applied > MIGRATIONS.length) {
    throw new Error(`poem database schema version ${applied} is newer than this build knows (${MIGRATIONS.length})`);
  }
  for (let version = applied; version < MIGRATIONS.length; version++) {
    // Each step and its version bump commit together, so a crash never leaves a half-applied step.
    db.transaction(() => {
      db.exec(MIGRATIONS[version]!);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
}
