import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fixtureHooks } from '../../support/fixture-hooks.js';
import { OBJECT_STORE_SERVICES, startPlatform, type PlatformOptions, type RunningPlatform } from '../../../images/standalone/src/platform.js';

export const ROOT_USER = 'strata';
export const ROOT_PASSWORD = 'strata-e2e-password';
export const JWT_SECRET = 'e2e-jwt-secret-0123456789abcdef0123456789';

export interface TestPlatform {
  platform: RunningPlatform;
  /** The S3 endpoint (gateway), e.g. http://127.0.0.1:40123 */
  endpoint: string;
  dataDir: string;
  /** Stop the platform (the data dir stays, for restart tests). */
  stop(): Promise<void>;
  /** Stop and remove the data dir. */
  destroy(): Promise<void>;
}

/**
 * The standalone platform in this process on ephemeral ports, with a fresh (or given) data dir.
 * `generatedJwtSecret` leaves the JWT secret to the platform (generated and kept in the data dir).
 * `gatewayRules` is the text of the gateway's rules file (flow control, breakers, login limits),
 * written into the data dir.
 */
export async function startTestPlatform(
  dataDir?: string,
  opts: {
    generatedJwtSecret?: boolean;
    gatewayRules?: string;
    gatewayAnswerCacheBytes?: number;
    gatewayBodyIdleTimeoutMs?: number;
    blockPublicAcls?: boolean;
    /** The object ownership of a bucket created without `x-amz-object-ownership` (default BucketOwnerEnforced). */
    defaultObjectOwnership?: PlatformOptions['defaultObjectOwnership'];
    /** How the gateway gathers and writes server access-log lines. */
    accessLog?: PlatformOptions['accessLog'];
    env?: NodeJS.ProcessEnv;
    internalToken?: string;
    corsOrigins?: string[];
    /** The root user's password (default ROOT_PASSWORD): a data dir made elsewhere keeps its own. */
    rootPassword?: string;
    /** Production servers replacing the embedded defaults (PlatformOptions.production). */
    production?: PlatformOptions['production'];
  } = {},
): Promise<TestPlatform> {
  const dir = dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'strata-e2e-')));
  let gatewayRulesFile: string | undefined;
  if (opts.gatewayRules !== undefined) {
    gatewayRulesFile = path.join(dir, 'gateway-rules.yaml');
    await writeFile(gatewayRulesFile, opts.gatewayRules);
  }
  const platform = await startPlatform(
    {
      dataDir: dir,
      host: '127.0.0.1',
      ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
      rootUser: ROOT_USER,
      rootPassword: opts.rootPassword ?? ROOT_PASSWORD,
      jwtSecret: opts.generatedJwtSecret ? undefined : JWT_SECRET,
      internalToken: opts.internalToken,
      purgeSchedule: false,
      gatewayRulesFile,
      gatewayAnswerCacheBytes: opts.gatewayAnswerCacheBytes,
      gatewayBodyIdleTimeoutMs: opts.gatewayBodyIdleTimeoutMs,
      blockPublicAcls: opts.blockPublicAcls,
      defaultObjectOwnership: opts.defaultObjectOwnership,
      accessLog: opts.accessLog,
      env: opts.env,
      corsOrigins: opts.corsOrigins,
      production: opts.production,
      logLevel: process.env.STRATA_E2E_LOG_LEVEL ?? 'silent',
    },
    OBJECT_STORE_SERVICES,
  );
  const stop = () => platform.stop();
  return {
    platform,
    endpoint: platform.urls.gateway,
    dataDir: dir,
    stop,
    destroy: async () => {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Registers hooks that start a platform (as startTestPlatform with `opts`) before the suite and
 * destroy it after. Answers a TestPlatform that stands for the one running now.
 */
export function platformHooks(opts: Parameters<typeof startTestPlatform>[1] = {}): TestPlatform {
  return fixtureHooks(
    'suite',
    () => startTestPlatform(undefined, opts),
    (p) => p.destroy(),
  );
}

/** Set env variables for the platform about to start; answers a function that restores them. */
export function withEnv(env: Record<string, string>): () => void {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}
