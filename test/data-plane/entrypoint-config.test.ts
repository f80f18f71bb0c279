import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect } from 'chai';

const root = path.resolve(import.meta.dirname, '../..');

describe('data plane entrypoint: configuration from the environment', function () {
  this.timeout(60_000);

  it('refuses a bad STRATA_ORPHAN_GRACE_MS and STRATA_SECRET_KEY with one message naming each bad variable', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'images/data-plane/src/main.ts')], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        STRATA_PG_URL: 'postgres://127.0.0.1:1/none',
        STRATA_INTERNAL_TOKEN: 'a-long-enough-internal-token',
        STRATA_ORPHAN_GRACE_MS: 'soon',
        STRATA_SECRET_KEY: 'short',
      },
      encoding: 'utf8',
      timeout: 50_000,
    });
    expect(run.status).to.not.equal(0);
    expect(run.stderr).to.match(/invalid configuration for data-plane/);
    expect(run.stderr)
      .to.match(/STRATA_ORPHAN_GRACE_MS/)
      .and.match(/STRATA_SECRET_KEY/);
    expect(run.stderr).to.not.match(/STRATA_INTERNAL_TOKEN/);
  });
});
