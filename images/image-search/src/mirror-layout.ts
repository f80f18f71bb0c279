// The bucket mirror's earlier layout (object `key` at `s3/<bucket>/<key>`), brought to the hashed one
// (mirrorPathOf) when a record of it is read: a round then goes on as over any record.
import { promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../service-kit/src/index.js';
import type { MirrorEntry } from './bucket-source.js';
import type { ImageFiles } from './image-files.js';
import type { SearchService } from './search-service.js';

export interface LayoutContext {
  files: ImageFiles;
  service: SearchService;
  logger: Logger;
  /** The folder of the bucket's mirror. */
  mirrorRoot: string;
  /** The hashed path of a key (mirrorPathOf of the source's bucket). */
  pathOf: (key: string) => string;
}

/**
 * Each file of the earlier layout moved to its new path (indexed again there; the old path leaves the
 * index), emptied folders removed. A file that cannot be moved is dropped from the record and so fetched
 * again. `migrated`: whether anything was of the earlier layout (the record is to be written).
 */
export async function toHashedLayout(record: Map<string, MirrorEntry>, ctx: LayoutContext): Promise<{ record: Map<string, MirrorEntry>; migrated: boolean }> {
  const out = new Map<string, MirrorEntry>();
  const old: string[] = [];
  let moved = 0;
  for (const [p, entry] of record) {
    const wanted = ctx.pathOf(entry.key);
    if (p === wanted) {
      out.set(p, entry);
      continue;
    }
    old.push(p);
    try {
      const from = ctx.files.absolute(p);
      if (entry.skipped === undefined && statSync(from).isFile() && statSync(from).size === entry.size) {
        await fs.rename(from, ctx.files.absolute(wanted));
        out.set(wanted, entry);
        moved++;
      }
    } catch {
      // gone or not a file (a key that the old layout could not hold): fetched again
    }
  }
  if (!old.length) return { record, migrated: false };
  await ctx.service.removePaths(old);
  await Promise.all(old.map((p) => fs.rm(ctx.files.absolute(p), { force: true, recursive: true })));
  // The old layout's folders: removed when empty (deepest first), never with files of others in them.
  const dirs = new Set(
    old.flatMap((p) =>
      p
        .split('/')
        .slice(2, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  for (const dir of [...dirs].sort((a, b) => b.length - a.length)) await fs.rmdir(path.join(ctx.mirrorRoot, dir)).catch(() => undefined);
  ctx.logger.info({ moved, fetchedAgain: old.length - moved }, 'image bucket mirror moved to the hashed layout');
  return { record: out, migrated: true };
}
