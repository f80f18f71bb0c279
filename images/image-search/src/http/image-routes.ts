// Image bytes for the page: thumbnails of indexed images (GET /api/images/:id/thumbnail?size=160|320)
// and originals a browser cannot show (TIFF, HEIF; AVIF for a browser that does not ask for it)
// converted for display under /images (`?original=true` gives the stored bytes). Both are read under
// the rule of /images (image-access.ts): a caller who may read the image, or a URL this service signed.
import { existsSync, statSync } from 'node:fs';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ImageAccess } from '../image-access.js';
import type { ImageFiles } from '../image-files.js';
import { displayFormat, needsConversion } from '../image-formats.js';
import { THUMBNAIL_SIZES, type Rendition, type RenditionCache, type ThumbnailSize } from '../renditions.js';
import { InputError, type SearchService } from '../search-service.js';
import { UnauthorizedError, type WriteAuthorizer } from './auth.js';

/** Renditions change when their image does: the browser asks again each time (answered 304 while the ETag holds). */
function send(res: Response, rendition: Rendition): void {
  res.setHeader('Vary', 'Accept');
  res.sendFile(rendition.file, { headers: { 'Content-Type': rendition.type, 'Cache-Control': 'private, no-cache' } });
}

/** sharp's failure on a stored file that does not decode: 415 with its words (never a 500). */
async function decoding<T>(make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (/ENOENT/.test(message)) throw new InputError('no such image file', 404);
    throw new InputError(`the stored image does not decode: ${message}`, 415);
  }
}

export function imageRenditionRoutes(opts: {
  service: SearchService;
  files: ImageFiles;
  auth: WriteAuthorizer;
  access: ImageAccess;
  cache: RenditionCache;
}): Router {
  const { service, files, auth, access, cache } = opts;
  const router = express.Router();

  router.get('/api/images/:id/thumbnail', async (req, res) => {
    const size = Number(req.query.size ?? THUMBNAIL_SIZES[0]);
    if (!THUMBNAIL_SIZES.includes(size as ThumbnailSize)) throw new InputError(`size must be one of ${THUMBNAIL_SIZES.join(', ')}`);
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : NaN;
    const path = Number.isSafeInteger(id) && service.index.isLive(id) ? service.index.pathOf(id) : undefined;
    const caller = auth.caller(req);
    const readable = path !== undefined && (access.mayRead(caller, path) || access.signedFor(path, req.query.expires, req.query.signature));
    if (!readable) {
      // As for "more like this": an image the caller may not read is as unknown as one that does not exist.
      if (caller.kind === 'anonymous') throw new UnauthorizedError(401, 'this image is not public: send a token, or use the URL a search gave you');
      throw new InputError(`unknown image id ${req.params.id}`, 404);
    }
    const absolute = files.absolute(path);
    const format = displayFormat(req.headers.accept, false);
    send(res, await decoding(() => cache.thumbnail(absolute, size as ThumbnailSize, format)));
  });

  return router;
}

/**
 * Under /images, after imageReadGuard: an original the requesting browser cannot show is answered
 * with a conversion (WebP, else PNG or JPEG as its Accept allows); `?original=true` passes the stored
 * bytes through (a download), as does anything that is not a file here.
 */
export function browserFormats(files: ImageFiles, cache: RenditionCache) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const relative = files.servedPath(req.path);
    const accept = req.headers.accept;
    if (relative === null || req.query.original === 'true' || !needsConversion(relative, accept)) return next();
    const absolute = files.absolute(relative);
    if (!existsSync(absolute) || !statSync(absolute).isFile()) return next();
    void (async () => {
      const format = displayFormat(accept, await cache.hasAlpha(absolute).catch(() => false));
      send(res, await decoding(() => cache.display(absolute, format)));
    })().catch(next);
  };
}
