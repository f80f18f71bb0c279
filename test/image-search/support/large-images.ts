// Large test images made with sharp: a ~19 MB uncompressed TIFF as a camera or scanner writes them.
import sharp from 'sharp';
import { rng } from './clustered-vectors.js';

/** An uncompressed RGB TIFF of about 19.5 MB (2600×2500): one colour with per-pixel noise, so it is no flat test card. */
export function largeTiff(rgb: [number, number, number], seed: number): Promise<Buffer> {
  const [width, height] = [2600, 2500];
  const rand = rng(seed);
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = Math.max(0, Math.min(255, rgb[i % 3] + Math.round((rand() - 0.5) * 40)));
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .tiff({ compression: 'none' })
    .toBuffer();
}
