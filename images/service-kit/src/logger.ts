import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/**
 * How log lines are written: `pretty` (one readable line per entry) in a terminal, `json` (one object
 * per line, for collectors) when stdout is not a terminal; LOG_FORMAT=json|pretty decides otherwise.
 */
export function logFormat(env: NodeJS.ProcessEnv = process.env, isTty = Boolean(process.stdout.isTTY)): 'json' | 'pretty' {
  const format = env.LOG_FORMAT?.trim().toLowerCase();
  if (format === 'json' || format === 'pretty') return format;
  return isTty ? 'pretty' : 'json';
}

let prettyStdout: DestinationStream | undefined;

/** One readable stream on stdout shared by every logger (synchronous, so lines keep their order). */
function prettyDestination(): DestinationStream {
  prettyStdout ??= pretty({
    sync: true,
    colorize: Boolean(process.stdout.isTTY),
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname,service',
    singleLine: true,
  });
  return prettyStdout;
}

/** Logs tagged with the service name, in logFormat()'s format. LOG_LEVEL controls verbosity. */
export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  const options = { name: service, level, base: { service }, timestamp: pino.stdTimeFunctions.isoTime };
  return logFormat() === 'pretty' ? pino(options, prettyDestination()) : pino(options);
}
