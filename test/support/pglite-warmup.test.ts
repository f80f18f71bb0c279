import path from 'node:path';
import { expect } from 'chai';
import { startsPglite } from './pglite-warmup.js';

const file = (relative: string) => path.resolve(import.meta.dirname, '..', relative);

// The root hook warms PGlite only for runs whose files start it: the decision, by the files' code.
describe('PGlite warm-up: which test files start PGlite', () => {
  it('finds PGlite started in a file or in a test helper it imports', () => {
    expect(startsPglite(file('data-plane/group-commit.test.ts'))).to.equal(true); // started in the file itself
    expect(startsPglite(file('data-plane/objects.test.ts'))).to.equal(true); // through data-plane/harness.ts
    expect(startsPglite(file('e2e/sdk.test.ts'))).to.equal(true); // through e2e/support/platform.ts
  });

  it('skips files that start none, also where prose or this check names PGlite', () => {
    expect(startsPglite(file('gateway/sigv4.test.ts'))).to.equal(false);
    expect(startsPglite(file('support/server-guard.test.ts'))).to.equal(false); // "PGlite" in a comment of server-guard.ts
    expect(startsPglite(file('support/pglite-warmup.test.ts'))).to.equal(false); // imports the check
  });
});
