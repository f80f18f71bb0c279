// Mocha's spec reporter, plus a JSON summary file (STRATA_TEST_SUMMARY) that .ci/run turns into
// the "N passed, N failed" line. The summary also lists each test file's wall time, slowest first,
// and the run ends by printing the ten slowest: where CI's minutes go. A parallel run (test:unit)
// reports no file of a suite (its workers send suites without them): its files are timed by their
// tests' own durations, hooks not counted.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_END } = Mocha.Runner.constants;

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    /** File → milliseconds spent in its top-level suites (hooks included). */
    const fileMs = new Map();
    const started = new Map();
    const isFileSuite = (suite) => suite.file && suite.parent && suite.parent.root;
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (isFileSuite(suite)) started.set(suite, Date.now());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      if (!started.has(suite)) return;
      const file = path.relative(process.cwd(), suite.file);
      fileMs.set(file, (fileMs.get(file) ?? 0) + Date.now() - started.get(suite));
      started.delete(suite);
    });
    /** File → milliseconds of its tests (the parallel run's measure). */
    const testMs = new Map();
    runner.on(EVENT_TEST_END, (test) => {
      if (!test.file || typeof test.duration !== 'number') return;
      const file = path.relative(process.cwd(), test.file);
      testMs.set(file, (testMs.get(file) ?? 0) + test.duration);
    });
    runner.once(EVENT_RUN_END, () => {
      const files = [...(fileMs.size > 0 ? fileMs : testMs)]
        .map(([file, ms]) => ({ file, seconds: Math.round(ms / 100) / 10 }))
        .sort((a, b) => b.seconds - a.seconds);
      console.log('\n  slowest test files:');
      for (const { file, seconds } of files.slice(0, 10)) console.log(`    ${seconds.toFixed(1).padStart(7)} s  ${file}`);
      const file = process.env.STRATA_TEST_SUMMARY;
      if (!file) return;
      const { passes, failures, pending } = this.stats;
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, files }, null, 2));
    });
  }
}
module.exports = SpecWithSummary;
