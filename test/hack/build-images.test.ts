import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';

const root = path.resolve(import.meta.dirname, '../..');

/** hack/build-images.sh on a machine without Docker: a build is skipped, a push fails. */
describe('hack/build-images.sh without a Docker engine', () => {
  let bin: string;
  before(() => {
    // A PATH with node, bash and coreutils but no docker.
    bin = mkdtempSync(path.join(tmpdir(), 'strata-no-docker-'));
    for (const tool of ['node', 'bash', 'dirname', 'env', 'cat']) {
      const found = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      if (found) symlinkSync(found, path.join(bin, tool));
    }
  });
  after(() => rmSync(bin, { recursive: true, force: true }));

  const run = (...args: string[]) =>
    spawnSync(path.join(bin, 'bash'), ['hack/build-images.sh', ...args], { cwd: root, env: { PATH: bin, TAG: 'test' }, encoding: 'utf8' });

  it('skips a plain build (exit 0) and says so', () => {
    const r = run();
    expect(r.status, r.stderr).to.equal(0);
    expect(r.stdout).to.contain('no Docker engine available');
  });

  it('fails --push (non-zero) with a clear message', () => {
    const r = run('--push');
    expect(r.status).to.equal(1);
    expect(r.stderr).to.contain('--push needs a Docker engine');
  });
});
