// Mocha's spec reporter, plus a JSON summary file (STRATA_TEST_SUMMARY) that .ci/run turns into
// the "N passed, N failed" line.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const file = process.env.STRATA_TEST_SUMMARY;
      if (!file) return;
      const { passes, failures, pending } = this.stats;
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending }));
    });
  }
}
module.exports = SpecWithSummary;
