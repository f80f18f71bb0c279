import { mkdtemp, rm } from 'node:fs/promises';
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
