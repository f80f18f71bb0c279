// Image search operations shared by the HTTP routes and the agent tools: encode, search, merge
// results of several queries, add images by path.
import type { Embedder } from './clip/encoder.js';
import { ImageDecodeError } from './clip/preprocess.js';
import type { ImageIndex, Hit } from './index/image-index.js';
import { BadPathError, type ImageFiles } from './image-files.js';
import type { Viewer } from './image-access.js';
import { THUMBNAIL_SIZES } from './renditions.js';

export interface SearchResultItem {
  id: number;
  path: string;
  distance: number;
  url: string;
  /** The 160 px thumbnail, and `srcset` with the 320 px one for 2x screens (the grid's images; `url` on open). */
  thumbnailUrl: string;
  thumbnailSrcset: string;
  /** The bucket object a mirrored image is (its path is a hash of the key): labels show `bucket/key`. */
  source?: { bucket: string; key: string };
}

/** A result item of image `id` at `path` as `viewer` gets it: its URLs (signed where not public). */
export function resultItem(viewer: Viewer, id: number, path: string, distance: number): SearchResultItem {
  const [small, large] = THUMBNAIL_SIZES.map((size) => viewer.thumbnailUrl(id, path, size));
  const source = viewer.objectOf?.(path);
  return { id, path, distance, url: viewer.url(path), thumbnailUrl: small, thumbnailSrcset: `${small} 1x, ${large} 2x`, ...(source ? { source } : {}) };
}

/**
 * The CLIP model is not available: search and add answer 503 with this message. It names no server
 * paths (anyone may search); why the model is missing is in the log and in an admin's /api/status.
 */
export class ModelUnavailableError extends Error {
  constructor() {
    super("CLIP model missing: search and add are disabled (the log and an admin's GET /api/status say why)");
  }
}

/** Bad input from a client (4xx); `status` defaults to 400. */
export class InputError extends Error {
  constructor(
    message: string,
    readonly status = 400,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export interface SearchServiceOptions {
  index: ImageIndex;
  files: ImageFiles;
  embedder: Embedder | null;
  /** Why there is no embedder (shown in status and errors). */
  modelError?: string;
  defaultTopk: number;
  maxTopk: number;
}

export class SearchService {
  constructor(private readonly opts: SearchServiceOptions) {}

  get index(): ImageIndex {
    return this.opts.index;
  }

  get files(): ImageFiles {
    return this.opts.files;
  }

  get modelLoaded(): boolean {
    return this.opts.embedder !== null;
  }

  get modelError(): string | undefined {
    return this.opts.embedder ? undefined : (this.opts.modelError ?? 'CLIP model missing');
  }

  private embedder(): Embedder {
    if (!this.opts.embedder) throw new ModelUnavailableError();
    return this.opts.embedder;
  }

  /** Validate a client topk (undefined → default). */
  topk(value: unknown): number {
    if (value === undefined || value === null || value === '') return this.opts.defaultTopk;
    const n = typeof value === 'string' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > this.opts.maxTopk) {
      throw new InputError(`topk must be an integer from 1 to ${this.opts.maxTopk}`);
    }
    return n;
  }

  private items(hits: Hit[], viewer: Viewer): SearchResultItem[] {
    return hits.map((h) => resultItem(viewer, h.id, h.path, h.distance));
  }

  /**
   * The `topk` nearest hits per query that the viewer may read (and `keep` accepts). Filtered inside
   * the search, before truncation: the index is asked for more until each query has `topk` such hits
   * or the index has no more to give, so that others' images never cost a caller results.
   */
  private async searchVisible(vectors: Float32Array, topk: number, viewer: Viewer, keep: (h: Hit) => boolean = () => true): Promise<Hit[][]> {
    const visible = (h: Hit) => keep(h) && viewer.mayRead(h.path);
    for (let k = topk; ; ) {
      const perQuery = await this.opts.index.search(vectors, k);
      const filtered = perQuery.map((hits) => hits.filter(visible));
      const total = this.opts.index.status().totalVectors;
      // A query that got fewer than k hits has had everything the index holds for it.
      const done = perQuery.every((hits, q) => filtered[q].length >= topk || hits.length < k) || k >= total;
      if (done) return filtered.map((hits) => hits.slice(0, topk));
      k = Math.min(k * 4, total);
    }
  }

  /** Each query searched; results of all queries de-duplicated (closest distance wins) and merged by distance. */
  async searchTexts(queries: string[], topk: number, viewer: Viewer): Promise<SearchResultItem[]> {
    const vectors = await this.embedder().encodeTexts(queries);
    const perQuery = await this.searchVisible(vectors, topk, viewer);
    return this.items(mergeByDistance(perQuery, topk), viewer);
  }

  async searchImage(image: Buffer, topk: number, viewer: Viewer): Promise<SearchResultItem[]> {
    let vector: Float32Array;
    try {
      vector = await this.embedder().encodeImages([image]);
    } catch (err) {
      if (err instanceof ImageDecodeError) throw new InputError(err.message, 415);
      throw err;
    }
    const [hits] = await this.searchVisible(vector, topk, viewer);
    return this.items(hits, viewer);
  }

  /** Images most similar to an indexed one the viewer may read (the image itself excluded). */
  async searchSimilar(id: number, topk: number, viewer: Viewer): Promise<SearchResultItem[]> {
    const path = this.opts.index.pathOf(id);
    const vector = path !== undefined && viewer.mayRead(path) ? this.opts.index.vectorOf(id) : undefined;
    // An image the caller may not read is as unknown to them as one that does not exist.
    if (!vector) throw new InputError(`unknown image id ${id}`, 404);
    const [hits] = await this.searchVisible(vector, topk, viewer, (h) => h.id !== id);
    return this.items(hits, viewer);
  }

  /**
   * Add images by path (relative to the image directory). All paths are checked before anything
   * changes; repeated and already indexed paths are skipped before anything is encoded. `field` names
   * the paths in errors.
   */
  async addPaths(
    paths: unknown,
    viewer: Viewer,
    field = 'image_paths',
  ): Promise<{ added: SearchResultItem[]; skipped: Array<{ id: number; path: string; reason: string }> }> {
    if (!Array.isArray(paths) || paths.length === 0 || paths.length > 1000) {
      throw new InputError(`${field} must be an array of 1 to 1000 paths`);
    }
    const resolved = paths.map((p) => {
      try {
        return this.opts.files.resolve(p as string);
      } catch (err) {
        if (err instanceof BadPathError) throw new InputError(err.message, 400);
        throw err;
      }
    });
    const skipped: Array<{ id: number; path: string; reason: string }> = [];
    const fresh = new Map<string, string>();
    for (const r of resolved) {
      const existing = this.opts.index.idOf(r.relative);
      if (existing !== undefined) skipped.push({ id: existing, path: r.relative, reason: 'already indexed' });
      else if (!fresh.has(r.relative)) fresh.set(r.relative, r.absolute);
    }
    if (!fresh.size) return { added: [], skipped };
    let vectors: Float32Array;
    try {
      vectors = await this.embedder().encodeImages([...fresh.values()]);
    } catch (err) {
      if (err instanceof ImageDecodeError) throw new InputError(err.message, 400);
      throw err;
    }
    const result = await this.opts.index.add(vectors, [...fresh.keys()]);
    return {
      added: result.added.map((a) => resultItem(viewer, a.id, a.path, 0)),
      skipped: [...skipped, ...result.skipped],
    };
  }

  private readonly removalListeners: Array<(paths: string[]) => Promise<void>> = [];

  /** Told the paths of images a caller removed by id (a bucket source keeps them out of its rounds). */
  onRemoved(listener: (paths: string[]) => Promise<void>): void {
    this.removalListeners.push(listener);
  }

  /** Remove ids (all must be known, else 404 and nothing changes). */
  async removeIds(ids: unknown): Promise<{ removed: number[] }> {
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > 10_000 || !ids.every((id) => Number.isInteger(id))) {
      throw new InputError('image_ids must be an array of 1 to 10000 integer ids');
    }
    const paths = (ids as number[]).map((id) => this.opts.index.pathOf(id)).filter((p): p is string => p !== undefined);
    const result = await this.opts.index.remove(ids as number[]);
    for (const listener of this.removalListeners) await listener(paths);
    return result;
  }

  /** Remove the indexed images at these paths (paths not indexed are ignored); returns the removed ids. */
  async removePaths(paths: readonly string[]): Promise<number[]> {
    const ids = paths.map((p) => this.opts.index.idOf(p)).filter((id): id is number => id !== undefined);
    if (!ids.length) return [];
    return (await this.opts.index.remove(ids)).removed;
  }

  async captionOf(path: string): Promise<string | undefined> {
    return this.opts.files.caption(path);
  }

  /** Index images under the image directory not indexed yet, in batches; returns how many were added. */
  async indexDirectory(onBatch?: (done: number, total: number) => void): Promise<number> {
    return (await this.indexPaths(await this.opts.files.list(), { onBatch })).added;
  }

  /**
   * Index the given paths (relative to the image directory), each once, in batches: paths not
   * indexed yet, and with `replace` indexed ones too (their new vector replaces the old one).
   * Files that do not decode as images are skipped with the reason.
   */
  async indexPaths(
    paths: string[],
    options: { replace?: boolean; onBatch?: (done: number, total: number) => void } = {},
  ): Promise<{ added: number; replaced: number; skipped: Array<{ path: string; reason: string }> }> {
    const all = [...new Set(paths)].filter((p) => options.replace || this.opts.index.idOf(p) === undefined);
    const result = { added: 0, replaced: 0, skipped: [] as Array<{ path: string; reason: string }> };
    for (let start = 0; start < all.length; start += 64) {
      const batch = all.slice(start, start + 64);
      const vectors: Float32Array[] = [];
      const kept: string[] = [];
      for (const p of batch) {
        try {
          vectors.push(await this.embedder().encodeImages([this.opts.files.absolute(p)]));
          kept.push(p);
        } catch (err) {
          if (!(err instanceof ImageDecodeError)) throw err;
          result.skipped.push({ path: p, reason: err.message });
        }
      }
      const joined = new Float32Array(kept.length * this.opts.index.dim);
      vectors.forEach((v, i) => joined.set(v, i * this.opts.index.dim));
      const added = await this.opts.index.add(joined, kept, { replace: options.replace });
      result.added += added.added.length - added.replaced.length;
      result.replaced += added.replaced.length;
      options.onBatch?.(start + batch.length, all.length);
    }
    return result;
  }
}

export function mergeByDistance(lists: Hit[][], topk: number): Hit[] {
  const best = new Map<number, Hit>();
  for (const list of lists) {
    for (const hit of list) {
      const seen = best.get(hit.id);
      if (!seen || hit.distance < seen.distance) best.set(hit.id, hit);
    }
  }
  return [...best.values()].sort((a, b) => a.distance - b.distance || a.id - b.id).slice(0, topk);
}
