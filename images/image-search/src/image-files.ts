// The image directory: safe resolution of user-supplied paths, URLs under /images, sidecar captions.
import { existsSync, promises as fs, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

export const IMAGE_EXTENSIONS = new Set(['.jpg', '.jpeg', '.png', '.webp', '.gif', '.tif', '.tiff', '.avif']);

export class BadPathError extends Error {}

export class ImageFiles {
  readonly root: string;

  constructor(dir: string) {
    this.root = path.resolve(dir);
  }

  /**
   * A path relative to the image directory (as stored in the index), from user input that may be
   * relative or absolute. Anything resolving outside the directory (.., symlinks) is refused.
   */
  resolve(input: string): { relative: string; absolute: string } {
    if (typeof input !== 'string' || !input.trim() || input.includes('\0')) throw new BadPathError('image path must be a non-empty string');
    const absolute = path.resolve(this.root, input);
    if (!this.inside(absolute)) throw new BadPathError(`${input}: outside the image directory`);
    if (!existsSync(absolute) || !statSync(absolute).isFile()) throw new BadPathError(`${input}: no such image file`);
    // A symlink inside the directory that points out of it is refused too.
    if (!this.inside(realpathSync(absolute))) throw new BadPathError(`${input}: outside the image directory`);
    if (!IMAGE_EXTENSIONS.has(path.extname(absolute).toLowerCase())) throw new BadPathError(`${input}: not an image file name`);
    return { relative: path.relative(this.root, absolute).split(path.sep).join('/'), absolute };
  }

  private inside(p: string): boolean {
    const rootReal = existsSync(this.root) ? realpathSync(this.root) : this.root;
    return [this.root, rootReal].some((r) => p === r || p.startsWith(r + path.sep));
  }

  /**
   * False when a URL path under /images names a file that resolves outside the directory (a symlink
   * pointing out of it); the static handler refuses ".." on its own.
   */
  servable(urlPath: string): boolean {
    let absolute: string;
    try {
      absolute = path.join(this.root, decodeURIComponent(urlPath));
    } catch {
      return true; // malformed escapes: the static handler answers 400
    }
    if (!existsSync(absolute)) return true;
    return this.inside(realpathSync(absolute));
  }

  absolute(relative: string): string {
    return path.join(this.root, relative);
  }

  /** Browser URL of an indexed image (served by the static /images area). */
  url(relative: string): string {
    return '/images/' + relative.split('/').map(encodeURIComponent).join('/');
  }

  /** A one-line caption from a .txt file beside the image, when there is one. */
  async caption(relative: string): Promise<string | undefined> {
    const file = this.absolute(relative).replace(/\.[^.]+$/, '.txt');
    try {
      const text = await fs.readFile(file, 'utf8');
      return text
        .split('\n')
        .find((l) => l.trim())
        ?.trim()
        .slice(0, 200);
    } catch {
      return undefined;
    }
  }

  /** Every image file under the directory, relative paths, sorted. */
  async list(): Promise<string[]> {
    if (!existsSync(this.root)) return [];
    const entries = await fs.readdir(this.root, { recursive: true, withFileTypes: true });
    return entries
      .filter((e) => e.isFile() && IMAGE_EXTENSIONS.has(path.extname(e.name).toLowerCase()))
      .map((e) => path.relative(this.root, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
      .sort();
  }
}
