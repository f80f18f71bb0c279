import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs (one object per line) tagged with the service name. LOG_LEVEL controls verbosity. */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name: service, level, base: { service }, timestamp: pino.stdTimeFunctions.isoTime });
}
