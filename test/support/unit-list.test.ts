import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { expect } from 'chai';

const root = path.resolve(import.meta.dirname, '../..');
const unit = createRequire(import.meta.url)(path.join(root, '.mocharc.unit.cjs')) as { spec: string[]; require: string[] };

// Mocha only warns about a listed file that is missing: a renamed file would drop out of test:unit unseen.
describe('the test:unit list (.mocharc.unit.cjs)', () => {
  it('names test files that exist, once each, outside test/e2e, with the server guard loaded', () => {
    expect(unit.spec.length).to.be.greaterThan(0);
    expect(unit.spec.filter((f) => !existsSync(path.join(root, f)))).to.deep.equal([]);
    expect(unit.spec.filter((f) => !/^test\/.+\.test\.ts$/.test(f) || f.startsWith('test/e2e/'))).to.deep.equal([]);
    expect(new Set(unit.spec).size).to.equal(unit.spec.length);
    expect(unit.require).to.include('test/support/unit-run.ts');
  });
});
