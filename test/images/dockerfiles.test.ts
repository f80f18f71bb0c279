import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { imageStage, instructions, resolveStage, SHARED_DOCKERFILE, stages, type ResolvedStage } from '../../hack/images/dockerfile.js';
import { moduleGraph } from '../../hack/images/graph.js';
import { compiledPath, IMAGES } from '../../hack/images/images.js';

const root = path.resolve(import.meta.dirname, '../..');
const NODE_IMAGE = 'node:22-bookworm-slim';
const dockerfile = (name: string) => readFileSync(path.join(root, 'images', name, 'Dockerfile'), 'utf8');
const shared = readFileSync(path.join(root, SHARED_DOCKERFILE), 'utf8');
/** The stages a resolved stage is made of, as file:stage. */
const layerNames = (s: ResolvedStage) => s.layers.map((l) => `${l.file}:${l.stage.name ?? ''}`);

/** Sources a stage copies from the build context. */
function contextCopies(lines: string[]): string[] {
  return lines.filter((l) => /^COPY (?!--from)/.test(l)).flatMap((l) => l.split(/\s+/).slice(1, -1));
}

/** The variables the ENV instructions set (NAME=value forms), the last one winning. */
function envOf(lines: string[]): Map<string, string> {
  const env = new Map<string, string>();
  for (const line of lines.filter((l) => /^ENV\s/.test(l))) {
    for (const m of line.slice(4).matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S*)/g)) env.set(m[1], m[2]);
  }
  return env;
}

/** The ports the EXPOSE instructions declare. */
function exposed(lines: string[]): string[] {
  return lines.filter((l) => /^EXPOSE\s/.test(l)).flatMap((l) => l.split(/\s+/).slice(1));
}

describe('container images (Dockerfiles; no Docker engine here to build them)', () => {
  it('has a Dockerfile for every image', () => {
    for (const { name } of IMAGES) expect(existsSync(path.join(root, 'images', name, 'Dockerfile')), name).to.equal(true);
  });

  it('builds the shared stages on Node 22: the toolchain, npm ci and the sources in build, the non-root user in runtime', () => {
    expect(instructions(shared)).to.include('ARG NODE_IMAGE=node:22-bookworm-slim');
    const build = resolveStage(root, SHARED_DOCKERFILE, 'build');
    expect(build.base).to.equal(NODE_IMAGE);
    expect(build.instructions).to.include('RUN npm ci --no-audit --no-fund');
    const runtime = resolveStage(root, SHARED_DOCKERFILE, 'runtime');
    expect(runtime.base).to.equal(NODE_IMAGE);
    expect(runtime.instructions).to.include('WORKDIR /app');
    expect(runtime.instructions.some((l) => /^RUN .*useradd --uid 10001 --gid strata/.test(l))).to.equal(true);
    expect(envOf(runtime.instructions).get('NODE_ENV')).to.equal('production');
    // Nothing of the repository in the runtime: /app comes whole from an image's build stage.
    expect(contextCopies(runtime.instructions)).to.deep.equal([]);
  });

  for (const { name, entry } of IMAGES) {
    it(`images/${name}/Dockerfile builds FROM the shared stages and repeats none of their instructions`, () => {
      const file = `images/${name}/Dockerfile`;
      expect(layerNames(imageStage(name, { root, stage: 'build' }))).to.deep.equal([`${SHARED_DOCKERFILE}:build`, `${file}:build`]);
      expect(layerNames(imageStage(name, { root }))).to.deep.equal([`${SHARED_DOCKERFILE}:node-base`, `${SHARED_DOCKERFILE}:runtime`, `${file}:`]);
      const own = instructions(dockerfile(name));
      const sharedLines = new Set(instructions(shared));
      expect(
        own.filter((l) => sharedLines.has(l)),
        name,
      ).to.deep.equal([]);
      // Its build stage only builds its /app: the toolchain and the dependencies are the shared stage's.
      expect(stages(dockerfile(name)).find((s) => s.name === 'build')?.instructions).to.deep.equal([`RUN npx tsx hack/images/build.ts ${name} /out`]);
    });

    it(`images/${name}/Dockerfile runs the compiled entry on Node 22 as a numeric non-root user, health-checked on its port`, () => {
      const build = imageStage(name, { root, stage: 'build' });
      const runtime = imageStage(name, { root });
      expect(build.base).to.equal(NODE_IMAGE);
      expect(runtime.base).to.equal(NODE_IMAGE);
      // The runtime stage takes /app whole from the build stage (hack/images/build.ts) and nothing from the context.
      expect(runtime.instructions).to.include('COPY --from=build /out ./');
      expect(contextCopies(runtime.instructions), name).to.deep.equal([]);
      const users = runtime.instructions.filter((l) => /^USER /i.test(l));
      expect(users.at(-1)).to.match(/^USER [1-9]\d*(:\d+)?$/);
      expect(runtime.instructions.filter((l) => /^CMD /.test(l)).at(-1)).to.equal(`CMD ["node", "${compiledPath(entry)}"]`);
      // The shared health check asks /healthz on HEALTHCHECK_PORT, else PORT: one the image sets and exposes.
      const healthcheck = runtime.instructions.filter((l) => /^HEALTHCHECK /.test(l)).at(-1);
      expect(healthcheck).to.contain('/healthz').and.contain('process.env.HEALTHCHECK_PORT ?? process.env.PORT');
      const env = envOf(runtime.instructions);
      const port = env.get('HEALTHCHECK_PORT') ?? env.get('PORT');
      expect(port, `${name}: HEALTHCHECK_PORT or PORT`).to.match(/^\d+$/);
      expect(exposed(runtime.instructions), name).to.include(port);
    });

    it(`images/${name}: its build stage and the shared one under it copy every module the image loads`, () => {
      const copied = contextCopies(imageStage(name, { root, stage: 'build' }).instructions);
      for (const src of copied) expect(existsSync(path.join(root, src)), `${name}: ${src}`).to.equal(true);
      for (const module of moduleGraph(entry, root).modules) {
        expect(
          copied.some((src) => module === src || module.startsWith(`${src}/`)),
          `${name}: ${module}`,
        ).to.equal(true);
      }
    });
  }

  it('builds the FAISS binding against Debian FAISS in the shared build stage that the images that search build on', () => {
    const build = resolveStage(root, SHARED_DOCKERFILE, 'build').instructions.join('\n');
    expect(build).to.contain('libfaiss-dev libopenblas-dev').and.contain('node-gyp rebuild').and.contain('images/image-search/native');
    for (const name of ['image-search', 'standalone']) {
      expect(imageStage(name, { root, stage: 'build' }).layers[0].file, name).to.equal(SHARED_DOCKERFILE);
    }
  });

  for (const name of ['model-server', 'image-search']) {
    it(`builds a CUDA variant of ${name} on the CUDA variant of the shared stages`, () => {
      // CPU by default: the CUDA provider binaries are skipped and the runtime is the plain Node image.
      expect(instructions(shared)).to.include.members(['ARG ONNXRUNTIME_NODE_INSTALL=skip', 'ENV ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL}']);
      expect(imageStage(name, { root }).base).to.equal(NODE_IMAGE);
      // With RUNTIME_BASE=cuda-base: NVIDIA's CUDA and cuDNN runtime, with Node from the Node image.
      const cuda = imageStage(name, { root, args: { RUNTIME_BASE: 'cuda-base' } });
      expect(cuda.base).to.match(/^nvidia\/cuda:12\.[\d.]+-cudnn-runtime-/);
      expect(cuda.instructions[0]).to.equal('COPY --from=node-base /usr/local/bin/node /usr/local/bin/node');
      expect(cuda.instructions).to.include('COPY --from=build /out ./');
      const script = readFileSync(path.join(root, 'hack/build-images.sh'), 'utf8');
      expect(script).to.match(new RegExp(`for name in [^\\n]*\\b${name}\\b`));
    });
  }

  it('hack/build-images.sh says so and exits 0 without a Docker engine', async () => {
    const { stdout } = await promisify(execFile)('bash', [path.join(root, 'hack/build-images.sh')], {
      // An engine that cannot be reached, even where a docker CLI is installed: nothing may be built here.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
    });
    expect(stdout).to.match(/no Docker engine/);
  });

  describe('hack/build-images.sh with an engine (a docker that records its commands)', () => {
    interface Build {
      file: string;
      target?: string;
      tag: string;
      args: Record<string, string>;
    }
    let builds: Build[];
    let pushes: string[];

    before(async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'strata-build-images-'));
      try {
        const log = path.join(dir, 'docker.log');
        writeFileSync(path.join(dir, 'docker'), `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\n`);
        chmodSync(path.join(dir, 'docker'), 0o755);
        await promisify(execFile)('bash', [path.join(root, 'hack/build-images.sh'), '--push'], {
          env: { PATH: `${dir}:${process.env.PATH}`, HOME: process.env.HOME, TAG: '9.9.9', REGISTRY: 'registry.test/strata/', CUDA: '1' },
        });
        const commands = readFileSync(log, 'utf8').trim().split('\n');
        builds = commands
          .filter((c) => c.startsWith('build '))
          .map((c) => {
            const words = c.split(/\s+/);
            const option = (flag: string) => words[words.indexOf(flag) + 1];
            const args = Object.fromEntries(
              words.flatMap((w, i) => (words[i - 1] === '--build-arg' ? [[w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]] : [])),
            );
            expect(words.at(-1), c).to.equal('.');
            return { file: option('--file'), target: words.includes('--target') ? option('--target') : undefined, tag: option('--tag'), args };
          });
        pushes = commands.filter((c) => c.startsWith('push ')).map((c) => c.slice(5));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('builds the shared stages first, then every image on them, and pushes only the images', () => {
      expect(builds.slice(0, 2)).to.deep.equal([
        { file: SHARED_DOCKERFILE, target: 'build', tag: 'strata-build:9.9.9', args: {} },
        { file: SHARED_DOCKERFILE, target: 'runtime', tag: 'strata-runtime:9.9.9', args: {} },
      ]);
      for (const { name } of IMAGES) {
        const image = builds.find((b) => b.tag === `registry.test/strata/${name}:9.9.9`);
        expect(image, name).to.deep.equal({
          file: `images/${name}/Dockerfile`,
          target: undefined,
          tag: `registry.test/strata/${name}:9.9.9`,
          args: { BUILD_IMAGE: 'strata-build:9.9.9', RUNTIME_IMAGE: 'strata-runtime:9.9.9' },
        });
        // What the image's ARGs name is what the script tagged.
        expect(layerNames(imageStage(name, { root, stage: 'build', args: image!.args }))[0]).to.equal(`${SHARED_DOCKERFILE}:build`);
        expect(layerNames(imageStage(name, { root, args: image!.args })).at(-2)).to.equal(`${SHARED_DOCKERFILE}:runtime`);
      }
      expect(pushes.filter((p) => p.includes('strata-build') || p.includes('strata-runtime'))).to.deep.equal([]);
      expect(pushes).to.include.members(IMAGES.map(({ name }) => `registry.test/strata/${name}:9.9.9`));
    });

    it('with CUDA=1 builds CUDA shared stages and the -cuda model server and image search on them', () => {
      const cudaShared = builds.filter((b) => b.file === SHARED_DOCKERFILE && b.tag.endsWith(':9.9.9-cuda'));
      expect(cudaShared.map((b) => b.target)).to.deep.equal(['build', 'runtime']);
      for (const b of cudaShared) {
        expect(b.args).to.include({ ONNXRUNTIME_NODE_INSTALL: 'cuda12', RUNTIME_BASE: 'cuda-base' });
        expect(b.args.CUDA_IMAGE).to.match(/^nvidia\/cuda:12\./);
      }
      const cudaImages = builds.filter((b) => b.file.startsWith('images/') && b.tag.endsWith('-cuda'));
      expect(cudaImages.map((b) => b.tag)).to.deep.equal(['registry.test/strata/model-server:9.9.9-cuda', 'registry.test/strata/image-search:9.9.9-cuda']);
      for (const b of cudaImages) {
        expect(b.args).to.deep.equal({ BUILD_IMAGE: 'strata-build:9.9.9-cuda', RUNTIME_IMAGE: 'strata-runtime:9.9.9-cuda' });
        expect(builds.indexOf(b)).to.be.greaterThan(builds.indexOf(cudaShared[1]));
      }
    });
  });

  it('keeps local state out of the build context, but nothing an image copies', () => {
    const patterns = readFileSync(path.join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(patterns).to.include.members(['node_modules', '.git', 'data']);
    const matches = (pattern: string, src: string) => {
      const segments = src.split('/');
      if (pattern.startsWith('**/')) return segments.includes(pattern.slice(3));
      return src === pattern || src.startsWith(`${pattern}/`);
    };
    // The last matching pattern decides; `!pattern` re-includes.
    const excluded = (src: string) =>
      patterns.reduce((out, p) => (p.startsWith('!') ? (matches(p.slice(1), src) ? false : out) : matches(p, src) ? true : out), false);
    const texts = [shared, ...IMAGES.map(({ name }) => dockerfile(name))];
    for (const src of texts.flatMap((t) => contextCopies(instructions(t)))) expect(excluded(src), `${src} is in .dockerignore`).to.equal(false);
  });
});
