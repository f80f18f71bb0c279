// CLIP image preprocessing: decode (JPEG/PNG/WebP/...), resize the shortest side to 224 (bicubic),
// centre-crop 224x224, scale to [0,1] and normalise with CLIP's mean/std, channels first.
import sharp from 'sharp';

export const IMAGE_SIZE = 224;
export const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
export const CLIP_STD = [0.26862954, 0.26130258, 0.27577711] as const;

export class ImageDecodeError extends Error {}

/** One image → 3*224*224 floats (CHW) written into `out` at `offset` (floats). */
export async function preprocessImage(input: Buffer | string, out: Float32Array, offset = 0): Promise<void> {
  let data: Buffer;
  try {
    const result = await sharp(input, { failOn: 'error' })
      // Transparent areas (PNG stamps, WebP) are composited on white rather than black.
      .flatten({ background: '#ffffff' })
      .toColourspace('srgb')
      .resize(IMAGE_SIZE, IMAGE_SIZE, { fit: 'cover', position: 'centre', kernel: 'cubic' })
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (result.info.channels !== 3) throw new Error(`expected 3 channels, got ${result.info.channels}`);
    data = result.data;
  } catch (err) {
    throw new ImageDecodeError(`not a decodable image: ${err instanceof Error ? err.message : String(err)}`);
  }
  const plane = IMAGE_SIZE * IMAGE_SIZE;
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) {
      out[offset + c * plane + i] = (data[i * 3 + c] / 255 - CLIP_MEAN[c]) / CLIP_STD[c];
    }
  }
}

/** A batch of images → N*3*224*224 floats. */
export async function preprocessImages(inputs: Array<Buffer | string>): Promise<Float32Array> {
  const size = 3 * IMAGE_SIZE * IMAGE_SIZE;
  const out = new Float32Array(inputs.length * size);
  await Promise.all(inputs.map((input, i) => preprocessImage(input, out, i * size)));
  return out;
}
