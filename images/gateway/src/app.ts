import express, { type Request } from 'express';
import type http from 'node:http';
import { Cluster } from 'ioredis';
import {
  Counter,
  createLogger,
  createRegistry,
  createApp,
  httpMetrics,
  cacheMetrics,
  deferredCounts,
  listen,
  parseRedisNodes,
  type Logger,
  type Registry,
  runChain,
  type ChainHandler,
  type Next,
  type RunningService,
} from '../../service-kit/src/index.js';
import { authenticate } from './auth/authenticate.js';
import { cachedCredentials } from './auth/credential-cache.js';
import { bearerPassport, tokenIssuer } from './auth/jwt.js';
import { LoginGuard } from './auth/login-guard.js';
import { ControlPlaneClient } from './clients/control-plane.js';
import { DataPlaneClient } from './clients/data-plane.js';
import { httpObjectLayer } from './clients/object-layer.js';
import { answeringObjectLayer, ObjectAnswerCache } from './clients/object-answer-cache.js';
import type { ReadCacheStore } from '../../object-model/src/object-read-cache.js';
import { BUCKET_CACHE_MS } from '../../object-model/src/bucket-resolution.js';
import type { ObjectOwnership } from '../../object-model/src/access-control.js';
import { AccessLogDelivery, DEFAULT_ACCESS_LOG_SETTINGS, type AccessLogSettings } from './access-log/delivery.js';
import { accessLogRecorder } from './access-log/recorder.js';
import { acceptBody, state } from './context.js';
import type { GatewayDeps } from './deps.js';
import { flowControl } from './flow-control/index.js';
import { capConnections } from './flow-control/connections.js';
import { tenantLabel } from './flow-control/flow-control.js';
import { adminRouter } from './handlers/admin.js';
import { login } from './handlers/login.js';
import { SMALL_BODY } from './handlers/object-read.js';
import { BucketAccess } from './middleware/bucket-access.js';
import { bodyIdleTimeout, DEFAULT_BODY_IDLE_TIMEOUT_MS } from './middleware/body-timeout.js';
import { crossOrigin } from './middleware/cors.js';
import { errorRenderer } from './middleware/errors.js';
import { minTransferRate } from './middleware/min-rate.js';
import { requestContext } from './middleware/request-context.js';
import { checkRequestTarget } from './middleware/request-target.js';
import { trustedProxies } from '../../service-kit/src/trusted-proxies.js';
import { nameOperation, s3Endpoint } from './s3/router.js';
import { virtualHostedStyle } from './s3/virtual-host.js';

export interface GatewayOptions {
  port: number;
  host?: string;
  controlPlaneUrl: string;
  dataPlaneUrl: string;
  internalToken: string;
  jwtSecret: string;
  /** Bearer token lifetime: seconds or "15m", "1h"... */
  jwtExpiresIn?: string;
  /** Origin clients use to reach the gateway (for presigned URLs); default: each request's Host. */
  publicUrl?: string;
  /** Domains whose subdomains name buckets (virtual-hosted style: `<bucket>.<domain>`); none: path style only. */
  virtualHostDomains?: readonly string[];
  /** Origins of browser pages allowed to call the gateway (`*`: any); default `*`, empty: no cross-origin calls. */
  corsOrigins?: readonly string[];
  rootUser?: string;
  region?: string;
  /** Accept AWS Signature Version 2 (default true); false: every SigV2 request is 403 AccessDenied. */
  signatureV2?: boolean;
  redirectExpiresSeconds?: number;
  credentialsCacheMs?: number;
  /** The one lifetime of a resolved bucket record (hack/adr/0007-bucket-resolution.md); default BUCKET_CACHE_MS. */
  bucketCacheMs?: number;
  /** Flow-control rules file (rate and concurrency limits, breakers), re-read on change. */
  flowRulesFile?: string;
  /** Redis Cluster seed nodes (`host:port`, STRATA_REDIS_NODES): rate-limit counters shared by every gateway replica. */
  redisNodes?: string[];
  /** Their password (STRATA_REDIS_PASSWORD). */
  redisPassword?: string;
  /** Prefix of the rate-limit keys there (default "strata:flow:"). */
  redisKeyPrefix?: string;
  /**
   * The cache that holds the data plane's object read cache (its version tokens): with it, the gateway
   * answers repeated GETs of small objects itself (clients/object-answer-cache.ts).
   */
  objectReadCache?: ReadCacheStore;
  /** Bytes of small-object answers the gateway keeps (default 8 MiB; 0 turns it off). */
  objectAnswerCacheBytes?: number;
  /** A request body silent this long is answered 400 RequestTimeout (default 20 s, as S3; 0: off). */
  bodyIdleTimeoutMs?: number;
  /** Refuse public ACLs and ignore existing public grants on every bucket (STRATA_BLOCK_PUBLIC_ACLS; default false). */
  blockPublicAcls?: boolean;
  /** The object ownership of a bucket created without `x-amz-object-ownership` (STRATA_DEFAULT_OBJECT_OWNERSHIP; default BucketOwnerEnforced, as S3). */
  defaultObjectOwnership?: ObjectOwnership;
  /** How server access-log lines are gathered and written (STRATA_ACCESS_LOG_*; defaults DEFAULT_ACCESS_LOG_SETTINGS). */
  accessLog?: Partial<AccessLogSettings>;
  /** The peers whose X-Forwarded-For and X-Forwarded-Proto are believed (proxy.ts; default: loopback and private addresses). */
  trustProxy?: string;
  logger?: Logger;
  registry?: Registry;
}

const JSON_LIMIT = '64kb';
/** Small-object answers kept by default: a few thousand hot 4 KiB objects, little next to the process's RSS budget. */
const DEFAULT_OBJECT_ANSWER_BYTES = 8 * 1024 * 1024;

/** First path segments of the routes the Express app serves (ops endpoints, /login, /admin); bucket names that would clash are reserved. */
const EXPRESS_ROUTES = new Set(['healthz', 'readyz', 'metrics', 'login', 'admin']);

/** The first segment of a request target's path, lower-cased as Express's case-insensitive routes match it. */
function firstSegment(url = '/'): string {
  const end = url.slice(1).search(/[/?]/);
  return (end < 0 ? url.slice(1) : url.slice(1, end + 1)).toLowerCase();
}

/**
 * The S3 gateway: Bearer (JWT) and SigV4 auth, tenant isolation, S3 REST over the control plane
 * (metadata) and the data plane (bytes), both reached over HTTP only.
 */
export async function startGateway(opts: GatewayOptions): Promise<RunningService> {
  const logger = opts.logger ?? createLogger('gateway');
  const registry = opts.registry ?? createRegistry('gateway');
  const redis = opts.redisNodes?.length
    ? new Cluster(parseRedisNodes(opts.redisNodes), {
        // Fail fast while the cluster is down: the rate limiter falls back to per-replica counters.
        enableOfflineQueue: false,
        clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
        redisOptions: { ...(opts.redisPassword ? { password: opts.redisPassword } : {}), connectTimeout: 1000, commandTimeout: 500, maxRetriesPerRequest: 1 },
      })
    : undefined;
  redis?.on('error', () => undefined);
  // X-Forwarded-For is believed only from the proxies named here (the ingress): a client that reaches the
  // gateway directly cannot choose the address that per-IP limits count.
  const proxies = trustedProxies(opts.trustProxy);
  const flow = await flowControl({
    redis,
    redisKeyPrefix: opts.redisKeyPrefix,
    rulesFile: opts.flowRulesFile,
    logger,
    registry,
    routeOf: (_req, res) => state(res).operation,
    userOf: (_req, res) => state(res).caller?.username,
    // Anonymous readers of public objects share by client address, so that one cannot take another's share.
    clientAddressOf: (req) => proxies.clientAddress(req),
    // Rejections render like every other error: S3 XML with the request id.
    render: (err, _req, _res, next) => next(err),
  });
  const controlPlane = new ControlPlaneClient(opts.controlPlaneUrl, opts.internalToken, (fn, scope) => flow.run('control-plane', fn, scope));
  const dataPlane = new DataPlaneClient(opts.dataPlaneUrl, opts.internalToken, (fn, bucket) => flow.run('data-plane', fn, bucket));
  // Hit ratio of the gateway's in-memory lookups: strata_cache_hits_total / strata_cache_misses_total.
  const cacheCounters = cacheMetrics(registry);
  const lookupHits = deferredCounts(cacheCounters.hits, 'cache');
  const lookupMisses = deferredCounts(cacheCounters.misses, 'cache');
  const countLookup = (cache: string) => (hit: boolean) => (hit ? lookupHits : lookupMisses)(cache);
  const credentials = cachedCredentials(
    (accessKey) => controlPlane.credentials(accessKey),
    opts.credentialsCacheMs ?? 10_000,
    countLookup('gateway-credentials'),
  );
  const answerBytes = opts.objectAnswerCacheBytes ?? DEFAULT_OBJECT_ANSWER_BYTES;
  // Answers to small whole-object GETs kept in the gateway, in front of the layer; none without a shared object read cache.
  const objects =
    opts.objectReadCache && answerBytes > 0
      ? answeringObjectLayer(
          httpObjectLayer(controlPlane, dataPlane),
          new ObjectAnswerCache(opts.objectReadCache, answerBytes, SMALL_BODY, countLookup('gateway-objects')),
        )
      : httpObjectLayer(controlPlane, dataPlane);
  const deps: GatewayDeps = {
    objects,
    controlPlane,
    buckets: new BucketAccess(objects, opts.bucketCacheMs ?? BUCKET_CACHE_MS, countLookup('gateway-buckets'), opts.blockPublicAcls ?? false),
    userByEmail: (email) => controlPlane.userByEmail(email),
    credentials,
    tokens: tokenIssuer(opts.jwtSecret, opts.jwtExpiresIn ?? '1h'),
    loginGuard: new LoginGuard(redis ? { kind: 'redis', client: redis, keyPrefix: opts.redisKeyPrefix ?? 'strata:flow:' } : { kind: 'memory' }, () =>
      flow.rules(),
    ),
    logger,
    region: opts.region ?? 'us-east-1',
    signatureV2: opts.signatureV2 ?? true,
    rootUser: opts.rootUser ?? 'strata',
    defaultObjectOwnership: opts.defaultObjectOwnership ?? 'BucketOwnerEnforced',
    publicUrl: opts.publicUrl,
    redirectSeconds: opts.redirectExpiresSeconds ?? 300,
    proxies,
    admitUser: (res, user) => flow.admitUser(res, state(res).operation, user),
  };

  const counters = {
    bytesIn: new Counter({
      name: 'strata_gateway_bytes_in_total',
      help: 'Bytes received from clients, by S3 operation',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    bytesOut: new Counter({
      name: 'strata_gateway_bytes_out_total',
      help: 'Bytes sent to clients, by S3 operation',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
  };
  // Requests and latency by S3 operation (the kit's route label carries the operation name).
  const metrics = httpMetrics(registry, (_req, res) => state(res).operation ?? 'Unknown');

  const app = createApp({
    name: 'gateway',
    logger,
    registry,
    readiness: {
      'control-plane': async () => void (await fetchOk(`${opts.controlPlaneUrl}/healthz`)),
      'data-plane': async () => void (await fetchOk(`${opts.dataPlaneUrl}/healthz`)),
    },
  });
  app.set('etag', false);
  // Preflights are answered before authentication (cors.ts), and one naming a bucket may look it up: the
  // 'Preflight' route's flow-control limits come first, so that a flood of them is refused before it
  // reaches the control plane.
  const preflightFlow = (req: http.IncomingMessage, res: http.ServerResponse, next: Next) => {
    if (req.method !== 'OPTIONS' || req.headers.origin === undefined) return next();
    state(res).operation = 'Preflight';
    flow.middleware(req, res, next);
  };
  const renderError = errorRenderer(logger, registry);
  // Server access logging of buckets that have it on: lines gathered here, written to their targets through the object layer.
  const accessLogs = new AccessLogDelivery(
    objects,
    (name) => deps.buckets.existing(name),
    deps.region,
    { ...DEFAULT_ACCESS_LOG_SETTINGS, ...opts.accessLog },
    logger,
    registry,
  );
  const context: ChainHandler[] = [
    requestContext(logger, counters),
    accessLogRecorder(deps.buckets, accessLogs, proxies),
    bodyIdleTimeout(opts.bodyIdleTimeoutMs ?? DEFAULT_BODY_IDLE_TIMEOUT_MS, renderError),
    minTransferRate(
      () => flow.rules().transfer,
      renderError,
      (res, what) => {
        const tenant = tenantLabel(state(res).caller?.username);
        logger.debug({ requestId: state(res).requestId, tenant, what }, 'transfer below the minimum rate: request ended');
        flow.countRejection(tenant, what);
      },
    ),
    metrics.middleware,
    checkRequestTarget,
    preflightFlow,
    crossOrigin(opts.corsOrigins ?? ['*'], deps.buckets),
  ];
  app.use(...context);
  const jsonBody = express.json({
    limit: JSON_LIMIT,
    type: () => true,
    verify: (req, _res, buf) => {
      (req as Request & { rawBody?: Buffer }).rawBody = buf;
    },
  });
  const passport = bearerPassport(opts.jwtSecret);
  const auth = authenticate({ passport, credentials, rootUser: deps.rootUser, region: deps.region, signatureV2: deps.signatureV2 });

  const s3: ChainHandler[] = [nameOperation, auth, flow.middleware, s3Endpoint(deps)];
  // A login's body is its credentials: it may come at once (100 Continue, where asked).
  const loginBody = (_req: http.IncomingMessage, res: http.ServerResponse, next: Next) => {
    acceptBody(res);
    next();
  };
  app.post('/login', flow.middleware, loginBody, jsonBody, login(deps));
  app.use('/admin', auth, flow.middleware, jsonBody, adminRouter(deps));
  // What else reaches the app under those first segments (GET /login, /healthz/x...) is S3's, as everywhere else.
  app.use(...s3);
  app.use(renderError);

  // S3 on Node's own request and response: the same middleware in the same order, with no router to walk
  // (nameOperation routes by method, path and subresources). The Express app serves only its own first segments.
  const chain = [...context, ...s3];
  // Virtual-hosted-style requests become path style before anything (routing included) reads the URL.
  const toPathStyle = virtualHostedStyle(opts.virtualHostDomains ?? []);
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    toPathStyle(req);
    if (EXPRESS_ROUTES.has(firstSegment(req.url))) app(req, res);
    else runChain(chain, req, res, renderError);
  };
  const running = await listen(Object.assign(listener, { locals: app.locals }), {
    name: 'gateway',
    logger,
    registry,
    port: opts.port,
    host: opts.host,
    onClose: [
      // (In-flight requests are done: their log lines are written before the upstream clients close.)
      () => accessLogs.close(),
      () => flow.close(),
      () => controlPlane.http.close(),
      () => dataPlane.http.close(),
      async () => void (await redis?.quit().catch(() => redis.disconnect())),
    ],
  });
  // Connections past the rules' caps are closed as they are accepted (flow-control/connections.ts).
  capConnections(
    running.server,
    () => flow.rules().connections,
    (reason) => flow.countRejection('-', reason),
  );
  // S3 ignores an Expect header it does not know; Node would answer 417 to any but 100-continue.
  running.server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => running.server.emit('request', req, res));
  // 100 Continue only once the headers are authenticated (acceptBody), not as Node would at once: a
  // refused client gets its error without sending its body first.
  running.server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    state(res).expectsContinue = true;
    running.server.emit('request', req, res);
  });
  return running;
}

async function fetchOk(url: string): Promise<void> {
  const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
  if (!r.ok) throw new Error(`${url} answered ${r.status}`);
}
