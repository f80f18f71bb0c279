import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { freshDirPerTest } from '../support/temp-dir.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * In a process of its own (the handlers are process-wide; it loads the three modules it needs, not the
 * whole kit with its database clients: half the child's CPU): an 'error' event nobody listens to, a
 * throw from a timer and an unawaited rejection are each logged and counted, and the process goes on
 * to serve its registry's metrics.
 */
const SCRIPT = `
import { EventEmitter } from 'node:events';
import { surviveUncaughtErrors } from '${repo}/images/service-kit/src/last-resort.ts';
import { createLogger } from '${repo}/images/service-kit/src/logger.ts';
import { createRegistry } from '${repo}/images/service-kit/src/metrics.ts';
surviveUncaughtErrors(createLogger('last-resort-test', 'error'));
const registry = createRegistry('last-resort-test', false);
setTimeout(() => new EventEmitter().emit('error', new Error('nobody listens')), 1);
setTimeout(() => { throw new Error('thrown from a timer'); }, 1);
void Promise.reject(new Error('nobody awaits'));
setTimeout(async () => { process.stdout.write('METRICS\\n' + (await registry.metrics())); }, 100);
`;

describe('service kit: last-resort handler', () => {
  const dir = freshDirPerTest('strata-last-resort-');

  it('logs and counts escaped errors instead of exiting', async () => {
    const script = path.join(dir.path, 'escapes.mjs');
    await writeFile(script, SCRIPT);
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script], { cwd: repo, timeout: 30_000 });
    const metrics = stdout.slice(stdout.indexOf('METRICS'));
    expect(metrics).to.match(/strata_uncaught_errors_total\{kind="exception",service="last-resort-test"\} 2/);
    expect(metrics).to.match(/strata_uncaught_errors_total\{kind="rejection",service="last-resort-test"\} 1/);
    // Each was logged with its error.
    for (const message of ['nobody listens', 'thrown from a timer', 'nobody awaits']) expect(stdout).to.contain(message);
  });
});
