// Root hook of every mocha run (.mocharc.json, .mocharc.unit.cjs): PGlite's first start in a process
// (initdb in a child process, then the WASM module's compile) is paid here, once, under its own long
// timeout, before any file's hooks. Without it the first file that starts an object layer pays it
// inside its 60 s `before` hook: 5 s on a quiet machine, 59 s seen under load, so single files
// failed their hooks. Later clusters are copies of the pristine one (pglite-cluster.ts): ~0.6 s.
// Runs whose files start no PGlite (by their text and their test helpers') skip it. In a parallel run
// (test:unit) root hooks run before each file in its worker: each worker pays the first start once.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPgliteSqlClient } from '../../images/service-kit/src/sql.js';

const FIRST_START_TIMEOUT_MS = 300_000;
/** Code in a test file, or in a helper it imports from test/, that starts PGlite (names, not prose). */
const STARTS_PGLITE = /createPgliteSqlClient|PgliteThread|PGlite\.create|startObjectLayer|startTestPlatform|standalone\/src\/(platform|main)\.js'/;

/** Whether `file`, or a module under test/ that it imports (transitively), mentions STARTS_PGLITE. */
export function startsPglite(file: string, seen = new Set<string>()): boolean {
  // This module names what it looks for; a file that imports it starts nothing.
  if (seen.has(file) || file === fileURLToPath(import.meta.url)) return false;
  seen.add(file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  if (STARTS_PGLITE.test(text)) return true;
  for (const [, spec] of text.matchAll(/from\s+'(\.[^']+)'/g)) {
    const target = path.resolve(path.dirname(file), spec!).replace(/\.js$/, '.ts');
    if (target.includes(`${path.sep}test${path.sep}`) && startsPglite(target, seen)) return true;
  }
  return false;
}

async function warm(dataDir?: string): Promise<void> {
  const client = await createPgliteSqlClient(dataDir);
  await client.close();
}

/** Whether this process paid PGlite's first start already. */
let warmed = false;

export const mochaHooks = {
  async beforeAll(this: Mocha.Context): Promise<void> {
    if (warmed) return;
    const files = new Set((this.test?.parent?.suites ?? []).map((s) => s.file).filter((f): f is string => !!f));
    if (![...files].some((f) => startsPglite(f))) return;
    warmed = true;
    this.timeout(FIRST_START_TIMEOUT_MS);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'strata-pglite-warmup-'));
    try {
      // Both pristine forms (in memory: a tarball; on disk: a folder), their initdb runs side by side.
      await Promise.all([warm(), warm(path.join(dir, 'pgdata'))]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
};
