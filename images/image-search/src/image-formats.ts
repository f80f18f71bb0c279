// Which image files this service reads, and which of them a browser shows as they are. Reading goes
// by what this build of sharp (libvips) decodes: its prebuilt binaries read JPEG, PNG, WebP, GIF, TIFF
// and, through libheif, AVIF; HEIC (HEVC inside HEIF) only where libheif was built with an HEVC decoder
// (not in the prebuilt binaries: patents), BMP never (libvips has no BMP loader).
import path from 'node:path';
import sharp, { type FormatEnum } from 'sharp';

interface RasterFormat {
  /** sharp's name of the decoder. */
  decoder: keyof FormatEnum;
  label: string;
  mime: string;
  /** Whether browsers show it: always (every current browser), when the request's Accept names it, never. */
  browser: 'always' | 'if-accepted' | 'never';
}

const RASTER: Record<string, RasterFormat> = {
  '.jpg': { decoder: 'jpeg', label: 'JPEG', mime: 'image/jpeg', browser: 'always' },
  '.jpeg': { decoder: 'jpeg', label: 'JPEG', mime: 'image/jpeg', browser: 'always' },
  '.png': { decoder: 'png', label: 'PNG', mime: 'image/png', browser: 'always' },
  '.webp': { decoder: 'webp', label: 'WebP', mime: 'image/webp', browser: 'always' },
  '.gif': { decoder: 'gif', label: 'GIF', mime: 'image/gif', browser: 'always' },
  '.tif': { decoder: 'tiff', label: 'TIFF', mime: 'image/tiff', browser: 'never' },
  '.tiff': { decoder: 'tiff', label: 'TIFF', mime: 'image/tiff', browser: 'never' },
  // Browsers that show AVIF say so in the Accept header of their image requests (Chromium, Firefox, Safari 16+).
  '.avif': { decoder: 'heif', label: 'AVIF', mime: 'image/avif', browser: 'if-accepted' },
  '.heic': { decoder: 'heif', label: 'HEIC', mime: 'image/heic', browser: 'never' },
  '.heif': { decoder: 'heif', label: 'HEIF', mime: 'image/heif', browser: 'never' },
};

/** Whether this sharp build decodes files named with `extension` (its decoders list the suffixes they read). */
function decodes(extension: string): boolean {
  const format = RASTER[extension];
  const input = format
    ? ((sharp.format as unknown as Record<string, { input?: unknown }>)[format.decoder]?.input as { file?: boolean; fileSuffix?: string[] } | undefined)
    : undefined;
  return Boolean(input?.file && input.fileSuffix?.includes(extension));
}

/** Extensions (lower case, with the dot) of the image files indexed: those this sharp build decodes. */
export const IMAGE_EXTENSIONS: ReadonlySet<string> = new Set(Object.keys(RASTER).filter(decodes));

const readable = () => [...IMAGE_EXTENSIONS].join(' ');

/** Why a file name is not indexed (null when its extension is one of IMAGE_EXTENSIONS). */
export function unsupportedReason(name: string): string | null {
  const extension = path.extname(name).toLowerCase();
  if (IMAGE_EXTENSIONS.has(extension)) return null;
  if (!extension) return `no file extension: not taken for an image (this service reads ${readable()})`;
  const known = RASTER[extension];
  if (known) return `${known.label} (${extension}) is not decodable by this build of sharp (it reads ${readable()})`;
  return `${extension} is not an image format this service decodes (it reads ${readable()})`;
}

/** Whether an image file is converted for a browser that sent `accept`: one this service decodes and the browser cannot show. */
export function needsConversion(name: string, accept: string | undefined): boolean {
  const extension = path.extname(name).toLowerCase();
  const format = RASTER[extension];
  if (!format || !IMAGE_EXTENSIONS.has(extension) || format.browser === 'always') return false;
  return format.browser === 'never' || !(accept ?? '').toLowerCase().includes(format.mime);
}

/** The format a conversion for display (or a thumbnail) is written in: WebP unless the browser says it takes none. */
export function displayFormat(accept: string | undefined, hasAlpha: boolean): 'webp' | 'png' | 'jpeg' {
  const a = (accept ?? '').toLowerCase();
  if (!a || /image\/webp|image\/\*|\*\/\*/.test(a)) return 'webp';
  return hasAlpha ? 'png' : 'jpeg';
}

export const MIME: Record<'webp' | 'png' | 'jpeg', string> = { webp: 'image/webp', png: 'image/png', jpeg: 'image/jpeg' };
