import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { createLogger, createPgliteSqlClient, type Logger, type RunningService, type SqlClient } from '../../service-kit/src/index.js';
import { startControlPlane } from '../../control-plane/src/app.js';
import { InMemoryBroker } from '../../control-plane/src/events/memory-broker.js';
import { InMemoryCache } from '../../data-plane/src/cache/memory-cache.js';
import { startDataPlane } from '../../data-plane/src/app.js';
import { startGateway } from '../../gateway/src/app.js';
import { ephemeralSecret, persistentSecret } from './secrets.js';

/** What the standalone platform is started with (env supplies it in main.ts; tests pass it). */
export interface PlatformOptions {
  dataDir: string;
  host?: string;
  ports?: { gateway?: number; dataPlane?: number; controlPlane?: number };
  rootUser?: string;
  rootPassword?: string;
  internalToken?: string;
  jwtSecret?: string;
  secretKey?: string;
  jwtExpiresIn?: string;
  publicUrl?: string;
  gatewayRulesFile?: string;
  /** Cron expression of the in-process purge, or false. */
  purgeSchedule?: string | false;
  logLevel?: string;
}

/**
 * What every service of the platform is started with: the embedded defaults shared in-process
 * (one PGlite database, one in-memory cache, one in-memory broker), secrets, and the URLs of the
 * services started before it.
 */
export interface PlatformContext {
  options: PlatformOptions;
  sql: SqlClient;
  cache: InMemoryCache;
  broker: InMemoryBroker;
  internalToken: string;
  jwtSecret: string;
  secretKey: string;
  rootUser: string;
  rootPassword: string;
  logger: (service: string) => Logger;
  /** URL of each service started so far, by name. */
  urls: Record<string, string>;
}

/** One service of the platform. Adding a service to `npm start` is one more entry in PLATFORM_SERVICES. */
export interface PlatformService {
  name: string;
  start(ctx: PlatformContext): Promise<RunningService>;
}

/** In start order; stopped in reverse. The lead adds model-server, poem-app and image-search here. */
export const PLATFORM_SERVICES: PlatformService[] = [
  {
    name: 'control-plane',
    start: (ctx) =>
      startControlPlane({
        port: ctx.options.ports?.controlPlane ?? 9002,
        host: '127.0.0.1',
        internalToken: ctx.internalToken,
        secretKey: ctx.secretKey,
        rootUser: ctx.rootUser,
        rootPassword: ctx.rootPassword,
        sql: ctx.sql,
        // The control plane's cache interface is a subset of the data plane's: one instance serves both.
        cache: ctx.cache,
        broker: ctx.broker,
        dataPlaneUrl: () => ctx.urls['data-plane'],
        purgeSchedule: ctx.options.purgeSchedule ?? false,
        logger: ctx.logger('control-plane'),
      }),
  },
  {
    name: 'data-plane',
    start: (ctx) =>
      startDataPlane({
        port: ctx.options.ports?.dataPlane ?? 9001,
        host: '127.0.0.1',
        internalToken: ctx.internalToken,
        dataDir: ctx.options.dataDir,
        sql: ctx.sql,
        cache: ctx.cache,
        broker: ctx.broker,
        logger: ctx.logger('data-plane'),
      }),
  },
  {
    name: 'gateway',
    start: (ctx) =>
      startGateway({
        port: ctx.options.ports?.gateway ?? 9000,
        host: ctx.options.host ?? '0.0.0.0',
        controlPlaneUrl: ctx.urls['control-plane'],
        dataPlaneUrl: ctx.urls['data-plane'],
        internalToken: ctx.internalToken,
        jwtSecret: ctx.jwtSecret,
        jwtExpiresIn: ctx.options.jwtExpiresIn,
        publicUrl: ctx.options.publicUrl,
        rootUser: ctx.rootUser,
        flowRulesFile: ctx.options.gatewayRulesFile,
        logger: ctx.logger('gateway'),
      }),
  },
];

export interface RunningPlatform {
  services: RunningService[];
  /** URL of each running service by name (gateway first for humans). */
  urls: Record<string, string>;
  rootUser: string;
  rootPassword: string;
  stop(): Promise<void>;
}

/** Start every platform service in one process on the shared embedded state under `dataDir`. */
export async function startPlatform(options: PlatformOptions, services: PlatformService[] = PLATFORM_SERVICES): Promise<RunningPlatform> {
  await mkdir(options.dataDir, { recursive: true });
  const sql = await createPgliteSqlClient(path.join(options.dataDir, 'pglite'));
  const broker = new InMemoryBroker();
  const ctx: PlatformContext = {
    options,
    sql,
    cache: new InMemoryCache(),
    broker,
    internalToken: options.internalToken ?? ephemeralSecret(),
    jwtSecret: options.jwtSecret ?? (await persistentSecret(options.dataDir, 'jwt-secret')),
    secretKey: options.secretKey ?? (await persistentSecret(options.dataDir, 'server-key')),
    rootUser: options.rootUser ?? 'strata',
    rootPassword: options.rootPassword ?? 'strata-secret-key',
    logger: (service) => createLogger(service, options.logLevel),
    urls: {},
  };
  const running: RunningService[] = [];
  const stop = async () => {
    for (const s of [...running].reverse()) await s.stop();
    await broker.close();
    await sql.close();
  };
  try {
    for (const service of services) {
      const r = await service.start(ctx);
      running.push(r);
      ctx.urls[service.name] = r.url;
    }
  } catch (err) {
    await stop();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return { services: running, urls: ctx.urls, rootUser: ctx.rootUser, rootPassword: ctx.rootPassword, stop: () => (stopping ??= stop()) };
}
