import type http from 'node:http';
import type { TLSSocket } from 'node:tls';
import proxyaddr from 'proxy-addr';
import { z } from 'zod';

/**
 * No proxy is believed unless configured: a peer on loopback or a private network may be any local
 * process or pod, and believing its X-Forwarded-For would let it pick the address that login failures
 * count against (its own, to escape the limit, or a victim's, to lock the victim out).
 */
export const DEFAULT_TRUST_PROXY = '';

/** The setting every service that tells clients apart by address reads (the gateway, the poem app, the model server, image search). */
export const trustProxyEnv = {
  /** Peers whose X-Forwarded-For/-Proto are believed (an ingress): addresses, subnets or names such as loopback, uniquelocal; a hop count; unset or `false`: none. */
  STRATA_TRUST_PROXY: z.string().optional(),
};

/** What a service (the gateway, the poem app, the model server, image search) believes of X-Forwarded-For and X-Forwarded-Proto, and from whom. */
export interface TrustedProxies {
  /** The client's address: the nearest X-Forwarded-For entry a trusted proxy did not add, else the peer's own. */
  clientAddress(req: http.IncomingMessage): string;
  /** The scheme the client used: X-Forwarded-Proto's first value when the peer is a trusted proxy, else the connection's own. */
  protocol(req: http.IncomingMessage): string;
}

/**
 * The peers whose forwarding headers are believed: `true`/`false`, a hop count, or comma-separated
 * addresses, subnets and names (loopback, linklocal, uniquelocal), as proxy-addr reads them; empty
 * (the default) believes no one.
 */
export function trustedProxies(setting: string = DEFAULT_TRUST_PROXY): TrustedProxies {
  const trust = trustOf(setting.trim());
  return {
    clientAddress: (req) => proxyaddr(req, trust) ?? req.socket.remoteAddress ?? 'unknown',
    protocol: (req) => {
      const own = (req.socket as Partial<TLSSocket>).encrypted ? 'https' : 'http';
      if (!trust(req.socket.remoteAddress ?? '', 0)) return own;
      const forwarded = req.headers['x-forwarded-proto'];
      return (typeof forwarded === 'string' && forwarded.split(',', 1)[0]!.trim()) || own;
    },
  };
}

function trustOf(setting: string): (address: string, hop: number) => boolean {
  if (setting === 'true' || setting === 'false') {
    const all = setting === 'true';
    return () => all;
  }
  if (/^\d+$/.test(setting)) {
    const hops = Number(setting);
    return (_address, hop) => hop < hops;
  }
  return proxyaddr.compile(
    setting
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
}
