// Renditions of indexed images made with sharp, cached on disk: thumbnails for the result grid (a few
// KB each) and, for originals a browser cannot show (TIFF, HEIF), a conversion for display. A cached
// file is named by the SHA-256 of the image's bytes and the rendition (content-addressed: the same
// picture under two paths is made once, a changed file gets new names), written atomically, and the
// cache is bounded: past `maxBytes` the least recently used files go.
import { createHash } from 'node:crypto';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import pLimit from 'p-limit';
import sharp, { type Sharp } from 'sharp';
import type { Logger } from '../../service-kit/src/index.js';
import { writeFileAtomic } from './atomic-file.js';
import { MIME } from './image-formats.js';

/** Thumbnail sizes (longest side, px): 160 for a grid tile, 320 for the same tile on a 2x screen. */
export const THUMBNAIL_SIZES = [160, 320] as const;
export type ThumbnailSize = (typeof THUMBNAIL_SIZES)[number];

/** Longest side of a conversion for display: enough for a detail view; `?original=true` gives the stored bytes. */
export const DISPLAY_MAX_SIDE = 2048;

export type RenditionFormat = keyof typeof MIME;

export interface Rendition {
  file: string;
  type: string;
}

export interface RenditionCacheOptions {
  dir: string;
  maxBytes: number;
  logger: Logger;
  /** Renditions made at once (default CONVERSIONS); the rest wait their turn. */
  conversions?: number;
}

/**
 * Renditions made at once. Each decode and encode holds a thread of libuv's pool (4 by default), which
 * the process's file reads and writes share (in `npm start`, the object store's too): many callers asking
 * for conversions of large originals at once must not take all of it.
 */
export const CONVERSIONS = 2;

/** How hard the encoder works: WebP's effort (0–6); from 4 on also mozjpeg and PNG's strongest deflate. */
interface Encoding {
  effort: number;
}

interface Entry {
  size: number;
  used: number;
}

export class RenditionCache {
  /** Cached files: size and last use (from their mtime at start), for eviction. */
  private readonly entries = new Map<string, Entry>();
  private total = 0;
  private ready: Promise<void>;
  private readonly making = new Map<string, Promise<void>>();
  /** SHA-256 of a file's bytes, remembered while its size and mtime stay the same. */
  private readonly hashes = new Map<string, { size: number; mtimeMs: number; hash: string }>();
  private clock = 0;
  private readonly limit: ReturnType<typeof pLimit>;

  constructor(private readonly opts: RenditionCacheOptions) {
    this.limit = pLimit(opts.conversions ?? CONVERSIONS);
    this.ready = this.load();
  }

  /** Renditions being made now (at most `conversions`). */
  get converting(): number {
    return this.limit.activeCount;
  }

  /** The directory's files as entries; temp files a crash left are removed. */
  private async load(): Promise<void> {
    await fs.mkdir(this.opts.dir, { recursive: true });
    const names = await fs.readdir(this.opts.dir);
    const stats = await Promise.all(
      names.map(async (name) => {
        const file = path.join(this.opts.dir, name);
        if (name.includes('.tmp-')) return void (await fs.rm(file, { force: true }));
        const stat = await fs.stat(file).catch(() => undefined);
        return stat?.isFile() ? { name, size: stat.size, mtime: stat.mtimeMs } : undefined;
      }),
    );
    for (const s of stats.filter((x) => x !== undefined).sort((a, b) => a.mtime - b.mtime)) {
      this.entries.set(s.name, { size: s.size, used: ++this.clock });
      this.total += s.size;
    }
  }

  /** A thumbnail of the image at `absolute`: its longest side `size` px at most (never enlarged). */
  thumbnail(absolute: string, size: ThumbnailSize, format: RenditionFormat): Promise<Rendition> {
    return this.rendition(absolute, `t${size}`, format, { effort: 4 }, (image) => image.resize(size, size, { fit: 'inside', withoutEnlargement: true }));
  }

  /** The image at `absolute` in a format browsers show, at most DISPLAY_MAX_SIDE px on its longest side. */
  display(absolute: string, format: RenditionFormat): Promise<Rendition> {
    // A browser waits for it: faster encoder settings (WebP effort 2, plain libjpeg: 2–7× faster, a few % larger) than for thumbnails.
    return this.rendition(absolute, `d${DISPLAY_MAX_SIDE}`, format, { effort: 2 }, (image) =>
      image.resize(DISPLAY_MAX_SIDE, DISPLAY_MAX_SIDE, { fit: 'inside', withoutEnlargement: true }),
    );
  }

  /** Whether the image has an alpha channel (a conversion to JPEG would lose it). */
  async hasAlpha(absolute: string): Promise<boolean> {
    return (await sharp(absolute).metadata()).hasAlpha ?? false;
  }

  /** Bytes the cache holds now. */
  get bytes(): number {
    return this.total;
  }

  private async rendition(absolute: string, variant: string, format: RenditionFormat, encoding: Encoding, shape: (image: Sharp) => Sharp): Promise<Rendition> {
    await this.ready;
    const name = `${await this.hashOf(absolute)}-${variant}.${format}`;
    const file = path.join(this.opts.dir, name);
    const known = this.entries.get(name);
    if (known) {
      known.used = ++this.clock;
      // Still there (the cache directory may have been cleaned by hand): served; else made again.
      if (
        await fs.stat(file).then(
          (s) => s.isFile(),
          () => false,
        )
      )
        return { file, type: MIME[format] };
      this.forget(name);
    }
    let pending = this.making.get(name);
    if (!pending) {
      pending = this.make(absolute, file, name, format, encoding, shape).finally(() => this.making.delete(name));
      this.making.set(name, pending);
    }
    await pending;
    return { file, type: MIME[format] };
  }

  private async make(absolute: string, file: string, name: string, format: RenditionFormat, encoding: Encoding, shape: (image: Sharp) => Sharp): Promise<void> {
    // EXIF orientation applied; transparency kept in WebP and PNG, on white in JPEG.
    let image = shape(sharp(absolute, { failOn: 'none' }).rotate());
    const thorough = encoding.effort >= 4;
    if (format === 'jpeg') image = image.flatten({ background: '#ffffff' }).jpeg({ quality: 80, mozjpeg: thorough });
    else if (format === 'png') image = image.png({ compressionLevel: thorough ? 9 : 6 });
    else image = image.webp({ quality: 75, effort: encoding.effort });
    const data = await this.limit(() => image.toBuffer());
    // A cache: no fsync (a crash loses at most renditions made again on demand), still all or nothing.
    await writeFileAtomic(file, data, { sync: false });
    this.entries.set(name, { size: data.length, used: ++this.clock });
    this.total += data.length;
    await this.evict();
  }

  /** Least recently used files out until the cache holds at most maxBytes. */
  private async evict(): Promise<void> {
    if (this.total <= this.opts.maxBytes) return;
    const order = [...this.entries].sort(([, a], [, b]) => a.used - b.used);
    for (const [name] of order) {
      if (this.total <= this.opts.maxBytes) break;
      if (this.making.has(name)) continue;
      this.forget(name);
      await fs.rm(path.join(this.opts.dir, name), { force: true });
    }
  }

  private forget(name: string): void {
    const entry = this.entries.get(name);
    if (!entry) return;
    this.entries.delete(name);
    this.total -= entry.size;
  }

  private async hashOf(absolute: string): Promise<string> {
    const stat = await fs.stat(absolute);
    const known = this.hashes.get(absolute);
    if (known && known.size === stat.size && known.mtimeMs === stat.mtimeMs) return known.hash;
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(absolute)) hash.update(chunk as Buffer);
    const hex = hash.digest('hex').slice(0, 40);
    this.hashes.set(absolute, { size: stat.size, mtimeMs: stat.mtimeMs, hash: hex });
    if (this.hashes.size > 100_000) this.hashes.delete(this.hashes.keys().next().value!);
    return hex;
  }
}
