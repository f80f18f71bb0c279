import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fixtureHooks } from './fixture-hooks.js';

/**
 * A new empty directory for each test of the calling suite, removed after it: call inside `describe`,
 * read `.path` inside a test.
 */
export function freshDirPerTest(prefix: string): { readonly path: string } {
  return freshDirHooks(prefix, 'each');
}

/** A new empty directory for the calling suite, removed after it: call inside `describe`, read `.path` inside a test. */
export function freshDirPerSuite(prefix: string): { readonly path: string } {
  return freshDirHooks(prefix, 'suite');
}

function freshDirHooks(prefix: string, scope: 'suite' | 'each'): { readonly path: string } {
  return fixtureHooks(
    scope,
    async () => ({ path: await mkdtemp(path.join(os.tmpdir(), prefix)) }),
    (dir) => rm(dir.path, { recursive: true, force: true }),
  );
}

/** Every file under `dir` (recursively), as paths relative to it, sorted; [] when `dir` does not exist. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) await walk(full);
      else out.push(path.relative(dir, full));
    }
  };
  await walk(dir);
  return out.sort();
}
