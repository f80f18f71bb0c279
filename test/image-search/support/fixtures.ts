// Test fixtures for image search: the test CLIP model and a small image directory, in temp dirs.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import sharp from 'sharp';
import { startImageSearch, type StartImageSearchOptions } from '../../../images/image-search/src/app.js';
import type { RunningService } from '../../../images/service-kit/src/index.js';
import { writeTestClipModel } from '../../../hack/clip/test-clip-model.js';
import { rng } from './clustered-vectors.js';

/** The IMAGE_SEARCH_API_KEY of test services, and the header that sends it. */
export const TEST_API_KEY = 'image-search-test-key-0123456789';
export const AUTH_HEADER = { authorization: `Bearer ${TEST_API_KEY}` };

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(tmpdir(), `strata-${prefix}-`));
}

export function makeTestModel(): string {
  const dir = tempDir('clip');
  writeTestClipModel(dir);
  return dir;
}

/** A noisy image of one colour (PNG), so near-duplicates differ a little. */
export async function colourImage(rgb: [number, number, number], seed: number, width = 320, height = 240): Promise<Buffer> {
  const rand = rng(seed);
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    for (let c = 0; c < 3; c++) raw[i * 3 + c] = Math.max(0, Math.min(255, rgb[c] + Math.round((rand() - 0.5) * 40)));
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
}

export const PALETTE: Record<string, [number, number, number]> = {
  red: [215, 35, 35],
  green: [45, 165, 65],
  blue: [35, 65, 215],
  yellow: [235, 215, 45],
};

/**
 * An image directory: colours/<colour>-<n>.png (3 of each colour), a JPEG and a WebP, some Tux Paint
 * stamps (with their caption files) when installed, and a file that is not an image.
 */
export async function makeImageDir(): Promise<{ dir: string; colourFiles: Record<string, string[]> }> {
  const dir = tempDir('images');
  mkdirSync(path.join(dir, 'colours'));
  const colourFiles: Record<string, string[]> = {};
  let seed = 1;
  for (const [name, rgb] of Object.entries(PALETTE)) {
    colourFiles[name] = [];
    for (let n = 0; n < 3; n++) {
      const rel = `colours/${name}-${n}.png`;
      await sharp(await colourImage(rgb, seed++)).toFile(path.join(dir, rel));
      colourFiles[name].push(rel);
    }
  }
  await sharp(await colourImage([215, 35, 35], 99))
    .jpeg()
    .toFile(path.join(dir, 'colours', 'red-photo.jpg'));
  await sharp(await colourImage([35, 65, 215], 98))
    .webp()
    .toFile(path.join(dir, 'colours', 'blue-photo.webp'));
  writeFileSync(path.join(dir, 'broken.png'), 'this is not an image');
  const stamps = '/usr/share/tuxpaint/stamps/animals/mammals';
  if (existsSync(stamps)) {
    mkdirSync(path.join(dir, 'tuxpaint'));
    for (const name of readdirSync(stamps)
      .filter((f) => f.endsWith('.png'))
      .slice(0, 6)) {
      copyFileSync(path.join(stamps, name), path.join(dir, 'tuxpaint', name));
      const caption = path.join(stamps, name.replace(/\.png$/, '.txt'));
      if (existsSync(caption)) copyFileSync(caption, path.join(dir, 'tuxpaint', name.replace(/\.png$/, '.txt')));
    }
  }
  return { dir, colourFiles };
}

export type ImageDir = Awaited<ReturnType<typeof makeImageDir>>;

export interface TestImageSearch {
  service: RunningService;
  modelDir: string;
  images: ImageDir;
  indexDir: string;
  /** Stops the service and removes its directories. */
  close(): Promise<void>;
}

/**
 * Options of image search over these directories, on a free loopback port, with TEST_API_KEY for the
 * routes that change the index and no log; `options` add or override.
 */
export function testServiceOptions(
  dirs: Pick<TestImageSearch, 'modelDir' | 'images' | 'indexDir'>,
  options: StartImageSearchOptions = {},
): StartImageSearchOptions {
  return {
    env: {},
    PORT: 0,
    host: '127.0.0.1',
    IMAGE_SEARCH_MODEL_DIR: dirs.modelDir,
    IMAGE_FILE_DIR: dirs.images.dir,
    IMAGE_SEARCH_INDEX_DIR: dirs.indexDir,
    IMAGE_SEARCH_API_KEY: TEST_API_KEY,
    logger: pino({ level: 'silent' }),
    ...options,
  };
}

/** Image search (testServiceOptions) over the test model, a fresh image directory (makeImageDir) and a fresh index. */
export async function startTestImageSearch(name: string, options: StartImageSearchOptions = {}): Promise<TestImageSearch> {
  const modelDir = makeTestModel();
  const images = await makeImageDir();
  const indexDir = tempDir(name);
  const remove = () => {
    for (const dir of [modelDir, images.dir, indexDir]) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const service = await startImageSearch(testServiceOptions({ modelDir, images, indexDir }, options));
    const close = async () => {
      await service.stop();
      remove();
    };
    return { service, modelDir, images, indexDir, close };
  } catch (err) {
    remove();
    throw err;
  }
}

/** Resolves once the index holds at least `count` vectors (a start-up scan runs in the background). */
export async function waitForVectors(url: string, count: number): Promise<void> {
  for (;;) {
    const status = (await (await fetch(`${url}/api/index/status`)).json()) as { totalVectors: number };
    if (status.totalVectors >= count) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
