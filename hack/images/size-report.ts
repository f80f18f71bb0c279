// Sizes of the images, summed from what each image's stages put into it: the base image, the Debian
// packages its runtime stage and the shared runtime stage under it install (with what they pull in),
// and the /app its build stage writes (hack/images/build.ts: compiled modules, assets, selected
// packages as installed on this machine).
//   npx tsx hack/images/size-report.ts
import { aptAdds, installedBytes } from './debian.js';
import { aptInstalls, imageStage } from './dockerfile.js';
import { filesBytes, imageContents, REPO_ROOT } from './graph.js';
import { IMAGES, type ImageSpec } from './images.js';

const MB = 1e6;

/**
 * Uncompressed sizes of the base images (linux/amd64, as `docker images` reports them). node:22-slim
 * (node:22-bookworm-slim): 220 MB, in "A Deeper Look into Node.js Docker Images"
 * (https://labs.iximiuz.com/tutorials/how-to-choose-nodejs-container-image); re-measure with
 * `docker image inspect -f '{{.Size}}' node:22-bookworm-slim`.
 */
export const BASE_IMAGE_BYTES: Readonly<Record<string, number>> = { 'node:22-bookworm-slim': 220 * MB };

/** The most an image may take, and the most one carrying ONNX Runtime may. */
export const LIMIT_BYTES = 300 * MB;
export const ONNX_LIMIT_BYTES = 450 * MB;

export interface ImageSize {
  name: string;
  base: string;
  baseBytes: number;
  aptPackages: string[];
  aptBytes: number;
  appBytes: number;
  totalBytes: number;
  onnxRuntime: boolean;
  limitBytes: number;
}

export function imageSize(spec: ImageSpec, root = REPO_ROOT): ImageSize {
  // The runtime stage with the shared stages under it, down to the outside base image.
  const stage = imageStage(spec.name, { root });
  const base = stage.base;
  const baseBytes = BASE_IMAGE_BYTES[base];
  if (baseBytes === undefined) throw new Error(`${spec.name}: no size known for base image ${base}`);
  const aptPackages = [...aptAdds(aptInstalls(stage))].sort();
  const aptBytes = aptPackages.reduce((sum, p) => sum + installedBytes(p), 0);
  const contents = imageContents(spec, root);
  const appBytes = filesBytes(contents.files, root);
  const onnxRuntime = contents.packageDirs.includes('node_modules/onnxruntime-node');
  const totalBytes = baseBytes + aptBytes + appBytes;
  return {
    name: spec.name,
    base,
    baseBytes,
    aptPackages,
    aptBytes,
    appBytes,
    totalBytes,
    onnxRuntime,
    limitBytes: onnxRuntime ? ONNX_LIMIT_BYTES : LIMIT_BYTES,
  };
}

function mb(bytes: number): string {
  return (bytes / MB).toFixed(1).padStart(6);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log('image           base      apt      app    total   limit');
  let over = 0;
  for (const spec of IMAGES) {
    const s = imageSize(spec);
    if (s.totalBytes > s.limitBytes) over++;
    console.log(
      `${s.name.padEnd(14)} ${mb(s.baseBytes)}   ${mb(s.aptBytes)}   ${mb(s.appBytes)}   ${mb(s.totalBytes)}   ${mb(s.limitBytes)}${s.onnxRuntime ? '  (ONNX Runtime)' : ''}${s.totalBytes > s.limitBytes ? '  OVER' : ''}`,
    );
  }
  console.log("MB (10^6 bytes). The CUDA variants add NVIDIA's CUDA and cuDNN base and are outside these limits.");
  process.exit(over ? 1 : 0);
}
