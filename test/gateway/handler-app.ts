import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, createLogger, createRegistry, runChain, type ChainHandler, type Logger, type Registry } from '../../images/service-kit/src/index.js';
import { S3Error, unresolvableEmail, type ObjectLayer } from '../../images/object-model/src/index.js';
import { anonymousMayAsk } from '../../images/gateway/src/auth/authenticate.js';
import { state } from '../../images/gateway/src/context.js';
import type { GatewayDeps } from '../../images/gateway/src/deps.js';
import { BucketAccess } from '../../images/gateway/src/middleware/bucket-access.js';
import { errorRenderer } from '../../images/gateway/src/middleware/errors.js';
import { trustedProxies } from '../../images/service-kit/src/trusted-proxies.js';
import { requestContext } from '../../images/gateway/src/middleware/request-context.js';
import { nameOperation, s3Endpoint } from '../../images/gateway/src/s3/router.js';
import { FakeObjectLayer } from './fake-object-layer.js';

/** A dependency the S3 handlers must not reach (accounts, tokens): any use fails the test. */
function unreachable<T>(name: string): T {
  return new Proxy(() => undefined, {
    get: () => {
      throw new Error(`${name} is not behind the S3 handlers' seam`);
    },
    apply: () => {
      throw new Error(`${name} is not behind the S3 handlers' seam`);
    },
  }) as T;
}

/** The object layer's methods `layer` has; every other one answers NotImplemented. */
function asObjectLayer(layer: Partial<ObjectLayer>): ObjectLayer {
  return new Proxy(layer, {
    get: (target, name) => {
      const method = (target as Record<PropertyKey, unknown>)[name];
      if (typeof method === 'function') return method.bind(target);
      return () => Promise.reject(new Error(`the fake object layer has no ${String(name)}`));
    },
  }) as ObjectLayer;
}

export interface HandlerApp {
  url: string;
  /** A request as `username` (signed with SigV4 as far as the handlers can tell). */
  fetch(method: string, target: string, init?: { headers?: Record<string, string>; body?: string }): Promise<Response>;
  close(): Promise<void>;
}

/**
 * The gateway's S3 endpoint (routing, handlers, error rendering) in front of `layer`, with the caller
 * `username` already authenticated: what the handlers parse, call and render, and nothing else.
 */
export async function handlerApp(
  layer: Partial<ObjectLayer>,
  /** null: an anonymous caller (no signature), let through for the operations the gateway lets anonymous callers ask. */
  username: string | null = 'alice',
  opts: {
    logger?: Logger;
    registry?: Registry;
    platformBlocksPublic?: boolean;
    /** The gateway's region (STRATA_REGION); default us-east-1. */
    region?: string;
    /** Users' e-mail addresses (address → user name, matched whatever the case), as the control plane resolves them; each lookup is pushed to `lookups`. */
    emails?: Record<string, string>;
    lookups?: string[];
  } = {},
): Promise<HandlerApp> {
  const logger = opts.logger ?? createLogger('gateway-handlers-test', 'silent');
  const registry = opts.registry ?? createRegistry('gateway-handlers-test', false);
  const counters = {
    bytesIn: new Counter({ name: 'test_bytes_in', help: 'in', labelNames: ['operation'] as const, registers: [registry] }),
    bytesOut: new Counter({ name: 'test_bytes_out', help: 'out', labelNames: ['operation'] as const, registers: [registry] }),
  };
  const objects = asObjectLayer(layer);
  const deps: GatewayDeps = {
    objects,
    controlPlane: unreachable('controlPlane'),
    userByEmail: (email) => {
      opts.lookups?.push(email);
      const user = Object.entries(opts.emails ?? {}).find(([address]) => address.toLowerCase() === email.toLowerCase())?.[1];
      return user ? Promise.resolve({ username: user }) : Promise.reject(unresolvableEmail(email));
    },
    buckets: new BucketAccess(objects, 0, undefined, opts.platformBlocksPublic),
    credentials: unreachable('credentials'),
    tokens: unreachable('tokens'),
    loginGuard: unreachable('loginGuard'),
    logger,
    region: opts.region ?? 'us-east-1',
    signatureV2: true,
    rootUser: 'root',
    defaultObjectOwnership: 'BucketOwnerEnforced',
    redirectSeconds: 300,
    proxies: trustedProxies(),
  };
  // The gateway's S3 chain (as app.ts runs it) with authentication replaced by the fixed caller.
  const chain: ChainHandler[] = [
    requestContext(logger, counters),
    nameOperation,
    (_req, res, next) => {
      if (username !== null) state(res).caller = { username, accessKey: `${username}-key`, isRoot: false, via: 'sigv4' };
      else if (!state(res).authenticatesItself && !anonymousMayAsk(state(res).operation)) return next(new S3Error('AccessDenied'));
      next();
    },
    s3Endpoint(deps),
  ];
  const renderError = errorRenderer(logger, registry);
  const server = http.createServer((req, res) => runChain(chain, req, res, renderError));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    fetch: (method, target, init = {}) => fetch(url + target, { method, headers: init.headers, body: init.body }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Mocha hooks giving each test a fresh fake object layer (set up by `seed`) and the handlers in front of it. */
export function handlerFixture(seed: (layer: FakeObjectLayer) => void): { layer: FakeObjectLayer; app: HandlerApp } {
  const fixture = {} as { layer: FakeObjectLayer; app: HandlerApp };
  beforeEach(async () => {
    fixture.layer = new FakeObjectLayer();
    seed(fixture.layer);
    fixture.app = await handlerApp(fixture.layer);
  });
  afterEach(() => fixture.app.close());
  return fixture;
}

/** The Code of an S3 error document. */
export const codeOf = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
