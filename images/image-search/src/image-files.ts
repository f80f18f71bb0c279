// The image directory: safe resolution of user-supplied paths, URLs under /images, sidecar captions.
import { existsSync, promises as fs, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { IMAGE_EXTENSIONS, unsupportedReason } from './image-formats.js';

export { IMAGE_EXTENSIONS };

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
    const unsupported = unsupportedReason(absolute);
    if (unsupported) throw new BadPathError(`${input}: not an image file name: ${unsupported}`);
    return { relative: path.relative(this.root, absolute).split(path.sep).join('/'), absolute };
  }

  private inside(p: string): boolean {
    const rootReal = existsSync(this.root) ? realpathSync(this.root) : this.root;
    return [this.root, rootReal].some((r) => p === r || p.startsWith(r + path.sep));
  }

  /**
   * The path (relative to the directory, as the index stores it) of the file a URL path under /images
   * names: normalised, symlinks resolved, so that it says where the bytes really are. Null when it
   * does not decode or leads outside the directory.
   */
  servedPath(urlPath: string): string | null {
    let absolute: string;
    try {
      absolute = path.resolve(this.root, '.' + path.posix.normalize('/' + decodeURIComponent(urlPath)));
    } catch {
      return null;
    }
    if (absolute.includes('\0') || !this.inside(absolute)) return null;
    const real = existsSync(absolute) ? realpathSync(absolute) : absolute;
    if (!this.inside(real)) return null;
    const rootReal = existsSync(this.root) ? realpathSync(this.root) : this.root;
    const base = real === rootReal || real.startsWith(rootReal + path.sep) ? rootReal : this.root;
    return path.relative(base, real).split(path.sep).join('/');
  }

  absolute(relative: string): string {
    return path.join(this.root, relative);
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
