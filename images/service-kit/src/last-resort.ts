import { Counter } from 'prom-client';
import type { Logger } from './logger.js';

/**
 * Errors that reached the process's last-resort handlers: an 'error' event nobody listened to, a
 * throw from a callback, a rejected promise nobody awaited. Each is a bug (every stream and promise
 * has its own handling), so the count should stay 0. One counter for the whole process, shown by
 * every service's registry (createRegistry registers it).
 */
export const uncaughtErrors = new Counter({
  name: 'strata_uncaught_errors_total',
  help: 'Errors that reached the process-wide last-resort handlers (uncaught exceptions, unhandled rejections); each is a bug',
  labelNames: ['kind'] as const,
  registers: [],
});

let installed: Logger | undefined;

/**
 * Keep the process serving when an error escapes every handler: log it and count it
 * (strata_uncaught_errors_total) instead of exiting, which would end every request in flight and,
 * under `npm start`, every service of the platform. Installed once per process (later calls do nothing).
 */
export function surviveUncaughtErrors(logger: Logger): void {
  if (installed) return;
  installed = logger;
  process.on('uncaughtException', (err, origin) => {
    uncaughtErrors.inc({ kind: origin === 'unhandledRejection' ? 'rejection' : 'exception' });
    logger.error({ err, origin }, 'uncaught error (a bug): logged and counted, the process keeps running');
  });
  process.on('unhandledRejection', (reason) => {
    uncaughtErrors.inc({ kind: 'rejection' });
    logger.error({ err: reason }, 'unhandled promise rejection (a bug): logged and counted, the process keeps running');
  });
}
