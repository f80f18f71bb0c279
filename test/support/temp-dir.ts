import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/**
 * A new empty directory for each test of the calling suite, removed after it: call inside `describe`,
 * read `.path` inside a test.
 */
export function freshDirPerTest(prefix: string): { readonly path: string } {
  const holder = { path: '' };
  beforeEach(async () => {
    holder.path = await mkdtemp(path.join(os.tmpdir(), prefix));
  });
  afterEach(async () => {
    await rm(holder.path, { recursive: true, force: true });
  });
  return holder;
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
