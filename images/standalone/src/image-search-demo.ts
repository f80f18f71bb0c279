// What `npm start` gives image search when the user has given it nothing: Strata's small test encoder
// (colours and textures, not CLIP) and a handful of generated demo images, so that a search answers
// right after the first start. A model or image directory of the user's own replaces each.
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { MODEL_FILES } from '../../image-search/src/clip/model-files.js';

/**
 * Demo images: name → an SVG scene. Each is mostly one colour (the test encoder describes an image by
 * its colours), the one its name starts with, so a search for that colour finds it first.
 */
export const DEMO_IMAGES: Record<string, string> = {
  'red-apple.png': scene('#dc1e1e', '<circle cx="150" cy="80" r="18" fill="#f07070"/><rect x="108" y="0" width="8" height="26" fill="#5a3a1a"/>'),
  'green-field.png': scene('#28aa3c', '<rect width="224" height="24" fill="#9fd3f5"/>'),
  'blue-sea.png': scene('#1e3cdc', '<path d="M90 120 L134 120 L126 134 L98 134 Z" fill="#f0f0f0"/>'),
  'yellow-sun.png': scene('#f0dc28', '<circle cx="112" cy="112" r="24" fill="#f5c014"/>'),
  'orange-sunset.png': scene('#f58c14', '<rect y="200" width="224" height="24" fill="#5a2d0c"/>'),
  'purple-flower.png': scene('#8232aa', '<rect x="108" y="170" width="8" height="54" fill="#2e7d32"/>'),
  'white-snow.png': scene('#fafafa', '<path d="M60 224 L112 170 L164 224 Z" fill="#c8d0da"/>'),
  'black-night.png': scene('#0a0a0a', '<circle cx="170" cy="50" r="16" fill="#e8e8d0"/>'),
};

function scene(background: string, shapes: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="224" height="224"><rect width="224" height="224" fill="${background}"/>${shapes}</svg>`;
}

export interface ImageSearchDemo {
  /** Variables for image search: the model and image directories, and indexing the images at start. */
  env: Record<string, string>;
  /** The test encoder runs (no model of the user's own). */
  testEncoder: boolean;
  /** Demo images written by this start (their first start); 0 when they were there or the user has images of their own. */
  imagesWritten: number;
}

/**
 * Settle image search's model and images under `dir` (the platform's data dir for image search).
 * `given` is the environment: IMAGE_SEARCH_MODEL_DIR / IMAGE_SEARCH_MODEL_S3_URL name a model, and
 * IMAGE_FILE_DIR / IMAGE_SEARCH_SOURCE_S3_URL images, of the user's own; a model put into `dir/model`
 * is used as well.
 */
export async function prepareImageSearchDemo(dir: string, given: NodeJS.ProcessEnv): Promise<ImageSearchDemo> {
  const env: Record<string, string> = {};
  const has = (name: string) => Boolean(given[name]?.trim());
  let testEncoder = false;
  if (!has('IMAGE_SEARCH_MODEL_DIR') && !has('IMAGE_SEARCH_MODEL_S3_URL')) {
    const own = path.join(dir, 'model');
    const complete = (d: string) => [MODEL_FILES.image, MODEL_FILES.text, MODEL_FILES.merges].every((f) => existsSync(path.join(d, f)));
    if (complete(own)) env.IMAGE_SEARCH_MODEL_DIR = own;
    else {
      const testModel = path.join(dir, 'test-model');
      testEncoder = complete(testModel) || (await writeTestModel(testModel));
      // Without the test model (an image without the development files) image search says the model is missing.
      env.IMAGE_SEARCH_MODEL_DIR = testEncoder ? testModel : own;
    }
  }
  let imagesWritten = 0;
  if (!has('IMAGE_FILE_DIR') && !has('IMAGE_SEARCH_SOURCE_S3_URL')) {
    const images = path.join(dir, 'images');
    // Written once per data dir, and only into a missing or empty directory: a user's own images are
    // never joined by demo ones, nor are demo images the user has deleted written again.
    const marker = path.join(dir, 'demo-images-written');
    const empty = !existsSync(images) || (await fs.readdir(images)).length === 0;
    if (empty && !existsSync(marker)) {
      imagesWritten = await writeDemoImages(images);
      await fs.writeFile(marker, `${new Date().toISOString()}\n`);
    }
    // The directory exists even when empty, so that image search starts before any image is added.
    await fs.mkdir(images, { recursive: true });
    env.IMAGE_FILE_DIR = images;
    // Images put into the directory are indexed at the next start.
    if (!has('IMAGE_SEARCH_SCAN_ON_START')) env.IMAGE_SEARCH_SCAN_ON_START = 'true';
  }
  return { env, testEncoder, imagesWritten };
}

/**
 * Write the test model with the development script (hack/clip, which needs the development dependencies
 * `npm ci` installs); false where they are absent (the standalone container image).
 */
async function writeTestModel(target: string): Promise<boolean> {
  let writeTestClipModel: (dir: string) => void;
  try {
    ({ writeTestClipModel } = await import('../../../hack/clip/test-clip-model.js'));
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_MODULE_NOT_FOUND') return false;
    throw err;
  }
  const tmp = `${target}.tmp-${process.pid}`;
  await fs.rm(tmp, { recursive: true, force: true });
  writeTestClipModel(tmp);
  await fs.rm(target, { recursive: true, force: true });
  await fs.rename(tmp, target);
  return true;
}

async function writeDemoImages(target: string): Promise<number> {
  const tmp = `${target}.tmp-${process.pid}`;
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { recursive: true });
  for (const [name, svg] of Object.entries(DEMO_IMAGES)) await sharp(Buffer.from(svg)).png().toFile(path.join(tmp, name));
  await fs.rm(target, { recursive: true, force: true });
  await fs.rename(tmp, target);
  return Object.keys(DEMO_IMAGES).length;
}

/**
 * Wait until image search has indexed `count` vectors (its background scan of the demo images): false
 * when it is not ready (no model) or `timeoutMs` passes first.
 */
export async function waitForIndexed(url: string, count: number, timeoutMs = 120_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const status = (await fetch(`${url}/api/status`).then(
      (r) => r.json(),
      () => null,
    )) as { ready?: boolean; index?: { totalVectors?: number } } | null;
    if (status?.ready === false) return false;
    if ((status?.index?.totalVectors ?? 0) >= count) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}
