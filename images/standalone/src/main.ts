import { applyHeapGrowth, createLogger, stopOnSignals, productionSettings } from '../../service-kit/src/index.js';
import { loadStandaloneEnv } from './config.js';
import { PLATFORM_SERVICES, startPlatform } from './platform.js';

/** `npm start`: the whole platform in one process with embedded defaults. */
const env = loadStandaloneEnv();
applyHeapGrowth();
const logger = createLogger('standalone', env.LOG_LEVEL);
const platform = await startPlatform({
  dataDir: env.STRATA_DATA_DIR,
  host: env.STRATA_HOST,
  ports: {
    gateway: env.STRATA_GATEWAY_PORT,
    dataPlane: env.STRATA_DATA_PLANE_PORT,
    controlPlane: env.STRATA_CONTROL_PLANE_PORT,
    modelServer: env.STRATA_MODEL_SERVER_PORT,
    poemApp: env.STRATA_POEM_APP_PORT,
    imageSearch: env.STRATA_IMAGE_SEARCH_PORT,
  },
  rootUser: env.STRATA_ROOT_USER,
  rootPassword: env.STRATA_ROOT_PASSWORD,
  internalToken: env.STRATA_INTERNAL_TOKEN,
  jwtSecret: env.STRATA_JWT_SECRET,
  secretKey: env.STRATA_SECRET_KEY,
  jwtExpiresIn: env.STRATA_JWT_EXPIRES_IN,
  publicUrl: env.STRATA_PUBLIC_URL,
  s3Domains: env.STRATA_S3_DOMAINS,
  corsOrigins: env.STRATA_CORS_ORIGINS,
  gatewayRulesFile: env.STRATA_GATEWAY_RULES_FILE,
  gatewayAnswerCacheBytes: env.STRATA_GATEWAY_ANSWER_CACHE_BYTES,
  inlineBlobBytes: env.STRATA_INLINE_BLOB_BYTES,
  directIo: env.STRATA_DIRECT_IO,
  pgliteFsync: env.STRATA_PGLITE_FSYNC,
  purgeSchedule: env.STRATA_PURGE_SCHEDULE === 'off' ? false : env.STRATA_PURGE_SCHEDULE,
  logLevel: env.LOG_LEVEL,
  // STRATA_PG_URL, STRATA_PG_REPLICA_URLS, STRATA_REDIS_NODES, STRATA_AMQP_URL...: unset = embedded defaults.
  production: productionSettings(env),
  env: process.env,
}, PLATFORM_SERVICES.filter((s) => !(env.STRATA_DISABLED_SERVICES as string[]).includes(s.name)));

const defaultPassword = !process.env.STRATA_ROOT_PASSWORD;
const gatewayUrl = env.STRATA_PUBLIC_URL ?? `http://127.0.0.1:${platform.services.find((s) => s.name === 'gateway')?.port ?? env.STRATA_GATEWAY_PORT}`;
// A human-readable banner on stderr (logs stay JSON on stdout).
process.stderr.write(
  [
    '',
    'Strata is running.',
    `  S3 endpoint   ${gatewayUrl}  (region us-east-1, path style${env.STRATA_S3_DOMAINS.length ? `, or virtual-hosted as <bucket>.${env.STRATA_S3_DOMAINS[0]}` : ''})`,
    `  root user     ${platform.rootUser}`,
    `  root password ${defaultPassword ? `${platform.rootPassword}  (development default: set STRATA_ROOT_PASSWORD)` : '(from STRATA_ROOT_PASSWORD)'}`,
    `  data dir      ${env.STRATA_DATA_DIR}`,
    ...Object.entries(platform.urls).map(([name, url]) => `  ${name.padEnd(13)} ${url}`),
    '',
    `  aws --endpoint-url ${gatewayUrl} s3 ls   (AWS_ACCESS_KEY_ID=${platform.rootUser})`,
    '',
  ].join('\n') + '\n',
);
stopOnSignals([{ stop: () => platform.stop() }], logger);
