import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';

const root = path.resolve(import.meta.dirname, '../..');
const IMAGES = ['gateway', 'data-plane', 'control-plane', 'model-server', 'poem-app', 'image-search', 'operator', 'standalone'];

/** Instructions of a Dockerfile, continuation lines joined. */
function instructions(file: string): string[] {
  return readFileSync(file, 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

describe('container images (Dockerfiles; no Docker engine here to build them)', () => {
  it('has a Dockerfile for every image', () => {
    for (const name of IMAGES) expect(existsSync(path.join(root, 'images', name, 'Dockerfile')), name).to.equal(true);
  });

  for (const name of IMAGES) {
    it(`images/${name}/Dockerfile is multi-stage, production deps only, non-root, with a health check`, () => {
      const lines = instructions(path.join(root, 'images', name, 'Dockerfile'));
      expect(lines.filter((l) => /^FROM /i.test(l)).length).to.be.greaterThan(1);
      expect(lines.some((l) => /npm ci .*--omit=dev/.test(l))).to.equal(true);
      const users = lines.filter((l) => /^USER /i.test(l));
      expect(users.length).to.be.greaterThan(0);
      // Numeric and not root: runAsNonRoot can only verify a numeric user.
      expect(users.at(-1)).to.match(/^USER [1-9]\d*(:\d+)?$/);
      expect(lines.some((l) => /^HEALTHCHECK /.test(l) && l.includes('/healthz'))).to.equal(true);
      const cmd = lines.filter((l) => /^CMD /.test(l)).at(-1)!;
      const entry = /"([^"]+\.ts)"/.exec(cmd)?.[1];
      expect(entry, cmd).to.be.a('string');
      expect(existsSync(path.join(root, entry!)), `${name}: ${entry}`).to.equal(true);
      // Every path the image copies from the build context must exist (services still in progress excepted).
      for (const copy of lines.filter((l) => /^COPY (?!--from)/.test(l))) {
        for (const src of copy.split(/\s+/).slice(1, -1)) {
          if (src.startsWith(`images/${name}`) && !existsSync(path.join(root, 'images', name))) continue;
          expect(existsSync(path.join(root, src)), `${name}: ${src}`).to.equal(true);
        }
      }
    });
  }

  it('builds the FAISS binding against Debian FAISS and ships the libraries at run time', () => {
    for (const name of ['image-search', 'standalone']) {
      const text = readFileSync(path.join(root, 'images', name, 'Dockerfile'), 'utf8');
      const stages = text.split(/^FROM /m).slice(1);
      expect(stages[0], name).to.contain('libfaiss-dev libopenblas-dev').and.contain('node-gyp rebuild').and.contain('images/image-search/native');
      expect(stages.at(-1), name).to.contain('libfaiss-dev libopenblas-dev');
    }
  });

  it('builds a CUDA variant of the model server (what GPU ModelServers run) from the same Dockerfile', () => {
    const lines = instructions(path.join(root, 'images/model-server/Dockerfile'));
    // CPU by default: the CUDA provider binaries are skipped and the runtime is the plain Node image.
    expect(lines).to.include.members(['ARG ONNXRUNTIME_NODE_INSTALL=skip', 'ENV ONNXRUNTIME_NODE_INSTALL=${ONNXRUNTIME_NODE_INSTALL}', 'ARG RUNTIME_IMAGE=node:20-bookworm-slim', 'FROM ${RUNTIME_IMAGE}']);
    // Whatever the runtime base, Node comes from the Node image.
    expect(lines).to.include('COPY --from=node /usr/local/bin/node /usr/local/bin/node');
    const script = readFileSync(path.join(root, 'hack/build-images.sh'), 'utf8');
    expect(script).to.contain('model-server:${TAG}-cuda').and.contain('--build-arg ONNXRUNTIME_NODE_INSTALL=cuda12').and.contain('--build-arg RUNTIME_IMAGE=');
  });

  it('hack/build-images.sh says so and exits 0 without a Docker engine', async () => {
    const { stdout } = await promisify(execFile)('bash', [path.join(root, 'hack/build-images.sh')], {
      // An engine that cannot be reached, even where a docker CLI is installed: nothing may be built here.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DOCKER_HOST: 'unix:///nonexistent/docker.sock' },
    });
    expect(stdout).to.match(/no Docker engine/);
  });

  it('keeps local state out of the build context, but nothing an image copies', () => {
    const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignored).to.include.members(['node_modules', '.git', 'data']);
    const excluded = (src: string) =>
      ignored.some((pattern) => {
        const segments = src.split('/');
        if (pattern.startsWith('**/')) return segments.includes(pattern.slice(3));
        return src === pattern || src.startsWith(`${pattern}/`);
      });
    for (const name of IMAGES) {
      for (const copy of instructions(path.join(root, 'images', name, 'Dockerfile')).filter((l) => /^COPY (?!--from)/.test(l))) {
        for (const src of copy.split(/\s+/).slice(1, -1)) expect(excluded(src), `${name}: ${src} is in .dockerignore`).to.equal(false);
      }
    }
  });
});
