import type { z } from 'zod';
import { loadConfig } from './config.js';
import { surviveUncaughtErrors } from './last-resort.js';
import { createLogger, type Logger } from './logger.js';
import { stopOnSignals } from './service.js';

/**
 * A service's container entrypoint: configuration from the environment only (every bad variable
 * named at once), a logger at LOG_LEVEL, and a bug that lets an error escape its request logged and
 * counted (strata_uncaught_errors_total), never an exit. The started service stops on SIGTERM/SIGINT.
 */
export async function runEntrypoint<S extends z.ZodObject<z.ZodRawShape>>(
  service: string,
  schema: S,
  start: (config: z.infer<S>, logger: Logger) => Promise<{ stop(): Promise<void> }>,
): Promise<void> {
  const config = loadConfig(service, schema);
  const logger = createLogger(service, (config as { LOG_LEVEL?: string }).LOG_LEVEL);
  surviveUncaughtErrors(logger);
  stopOnSignals([await start(config, logger)], logger);
}
