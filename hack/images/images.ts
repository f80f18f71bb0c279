// The container images the project builds: each one's entry module and the files beside its code that
// it reads at run time. Everything else an image holds is derived from the entry (hack/images/graph.ts):
// the modules it loads, the npm packages those import, and the shared libraries their addons link.

export interface ImageSpec {
  /** images/<name>/Dockerfile builds it. */
  name: string;
  /** The TypeScript module its container runs, relative to the repository root. */
  entry: string;
  /** Files and folders read at run time by path (web UIs, the model, the FAISS binding), relative to the repository root. */
  assets: string[];
}

/** The FAISS binding hack/build-native.mjs builds; image search loads it from native/build/Release beside its src. */
export const FAISS_BINDING = 'images/image-search/native/build/Release/strata_faiss.node';

const IMAGE_SEARCH_ASSETS = ['images/image-search/web', FAISS_BINDING];
const POEM_APP_ASSETS = ['images/poem-app/web'];
const MODEL_SERVER_ASSETS = ['images/model-server/model'];

/**
 * Packages that image code names but never loads in an image: tsx compiles TypeScript where the sources
 * run directly (the model server's worker bootstrap imports it only for a .ts worker); images run
 * JavaScript compiled ahead of time.
 */
export const SOURCE_ONLY_PACKAGES: readonly string[] = ['tsx'];

export const IMAGES: readonly ImageSpec[] = [
  { name: 'gateway', entry: 'images/gateway/src/main.ts', assets: [] },
  { name: 'data-plane', entry: 'images/data-plane/src/main.ts', assets: [] },
  { name: 'control-plane', entry: 'images/control-plane/src/main.ts', assets: [] },
  { name: 'model-server', entry: 'images/model-server/src/main.ts', assets: MODEL_SERVER_ASSETS },
  { name: 'poem-app', entry: 'images/poem-app/src/main.ts', assets: POEM_APP_ASSETS },
  { name: 'image-search', entry: 'images/image-search/src/main.ts', assets: IMAGE_SEARCH_ASSETS },
  { name: 'operator', entry: 'operator/main.ts', assets: [] },
  {
    name: 'standalone',
    entry: 'images/standalone/src/main.ts',
    assets: [...MODEL_SERVER_ASSETS, ...POEM_APP_ASSETS, ...IMAGE_SEARCH_ASSETS],
  },
];

export function imageSpec(name: string): ImageSpec {
  const spec = IMAGES.find((i) => i.name === name);
  if (!spec) throw new Error(`unknown image ${name}; one of ${IMAGES.map((i) => i.name).join(', ')}`);
  return spec;
}

/** Where the compiled form of a repository module sits in an image (under /app). */
export function compiledPath(module: string): string {
  return `dist/${module.replace(/\.ts$/, '.js')}`;
}
