import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { instructions, stages } from '../../hack/images/dockerfile.js';
import { moduleGraph } from '../../hack/images/graph.js';
import { compiledPath, IMAGES } from '../../hack/images/images.js';

const root = path.resolve(import.meta.dirname, '../..');
const dockerfile = (name: string) => readFileSync(path.join(root, 'images', name, 'Dockerfile'), 'utf8');

/** Sources a stage copies from the build context. */
function contextCopies(lines: string[]): string[] {
  return lines.filter((l) => /^COPY (?!--from)/.test(l)).flatMap((l) => l.split(/\s+/).slice(1, -1));
}

describe('container images (Dockerfiles; no Docker engine here to build them)', () => {
  it('has a Dockerfile for every image', () => {
    for (const { name } of IMAGES) expect(existsSync(path.join(root, 'images', name, 'Dockerfile')), name).to.equal(true);
  });

  for (const { name, entry } of IMAGES) {
    it(`images/${name}/Dockerfile builds on Node 22, compiles ahead of time and runs the compiled entry as a numeric non-root user`, () => {
      const text = dockerfile(name);
      const lines = instructions(text);
      const all = stages(text);
      const build = all.find((s) => s.name === 'build')!;
      expect(build, name).to.not.equal(undefined);
      expect(lines).to.include('ARG NODE_IMAGE=node:22-bookworm-slim');
      // The runtime stage takes /app whole from the build stage (hack/images/build.ts) and nothing from the context.
      const runtime = all.at(-1)!;
      expect(build.instructions).to.include(`RUN npx tsx hack/images/build.ts ${name} /out`);
      expect(runtime.instructions).to.include('COPY --from=build /out ./');
      expect(contextCopies(runtime.instructions), name).to.deep.equal([]);
      const users = runtime.instructions.filter((l) => /^USER /i.test(l));
      expect(users.at(-1)).to.match(/^USER [1-9]\d*(:\d+)?$/);
      expect(lines.some((l) => /^HEALTHCHECK /.test(l) && l.includes('/healthz'))).to.equal(true);
      expect(lines.filter((l) => /^CMD /.test(l)).at(-1)).to.equal(`CMD ["node", "${compiledPath(entry)}"]`);
    });

    it(`images/${name}/Dockerfile copies into its build stage every module the image loads`, () => {
      const copied = contextCopies(stages(dockerfile(name)).find((s) => s.name === 'build')!.instructions);
      for (const src of copied) expect(existsSync(path.join(root, src)), `${name}: ${src}`).to.equal(true);
      for (const module of moduleGraph(entry, root).modules) {
        expect(
          copied.some((src) => module === src || module.startsWith(`${src}/`)),
          `${name}: ${module}`,
        ).to.equal(true);
      }
    });
  }

  it('builds the FAISS binding against Debian FAISS in the build stage of the images that search', () => {
    for (const name of ['image-search', 'standalone']) {
      const build = stages(dockerfile(name))
        .find((s) => s.name === 'build')!
        .instructions.join('\n');
      expect(build, name).to.contain('libfaiss-dev libopenblas-dev').and.contain('node-gyp rebuild').and.contain('images/image-search/native');
    }
  });

  for (const name of ['model-server', 'image-search']) {
    it(`builds a CUDA variant of ${name} from the same Dockerfile`, () => {
      const lines = instructions(dockerfile(name));
      // CPU by default: the CUDA provider binaries are skipped and the runtime is the plain Node image.
      expect(lines).to.include.members([
        'ARG ONNXRUNTIME_NODE_INSTALL=skip',
        'ENV ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL}',
        'ARG RUNTIME_IMAGE=node:22-bookworm-slim',
        'FROM ${RUNTIME_IMAGE}',
      ]);
      // Whatever the runtime base, Node comes from the Node image.
      expect(lines).to.include('COPY --from=node /usr/local/bin/node /usr/local/bin/node');
      const script = readFileSync(path.join(root, 'hack/build-images.sh'), 'utf8');
      expect(script)
        .to.match(new RegExp(`for name in [^\\n]*\\b${name}\\b`))
        .and.contain('${name}:${TAG}-cuda');
      expect(script).to.contain('--build-arg ONNXRUNTIME_NODE_INSTALL=cuda12').and.contain('--build-arg RUNTIME_IMAGE=');
    });
  }

  it('hack/build-images.sh says so and exits 0 without a Docker engine', async () => {
    const { stdout } = await promisify(execFile)('bash', [path.join(root, 'hack/build-images.sh')], {
      // An engine that cannot be reached, even where a docker CLI is installed: nothing may be built here.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
    });
    expect(stdout).to.match(/no Docker engine/);
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
    for (const { name } of IMAGES) {
      for (const src of contextCopies(instructions(dockerfile(name)))) expect(excluded(src), `${name}: ${src} is in .dockerignore`).to.equal(false);
    }
  });
});
