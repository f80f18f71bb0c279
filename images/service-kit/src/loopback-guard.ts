import type http from 'node:http';
import { z } from 'zod';
import { sendJson } from './chain.js';

/** 127.0.0.0/8, ::1 and localhost; an unset host means all interfaces (Node's default). */
export function isLoopback(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/** The environment variable of the extra names (every service that listens on loopback reads it). */
export const allowedHostsEnv = {
  /** Names besides localhost and loopback addresses that a loopback-bound service answers to in `Host` (comma-separated, no ports; `*`: any; DNS-rebinding protection). */
  STRATA_ALLOWED_HOSTS: z.string().optional(),
};

/** STRATA_ALLOWED_HOSTS as a list of lower-case names. */
export function allowedHosts(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase().replace(/\.$/, ''))
    .filter(Boolean);
}

export interface HostCheckOptions {
  /** Names besides loopback ones the service answers to (STRATA_ALLOWED_HOSTS; `*` turns the check off). */
  allowedHosts?: readonly string[];
  /** Answers a refused request in the service's own error shape (default `{"error":{"code":"forbidden_host","message"}}`). */
  refuse?: (res: http.ServerResponse, status: 403, message: string) => void;
}

/** A Host header: a name or IPv4 address, or a bracketed IPv6 address, and an optional port (nothing a URL would read as user or path). */
const HOST_HEADER = /^(?:[a-z0-9._-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** Methods that change nothing (and that a page of any origin may send anyway). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * DNS-rebinding protection for a service listening on `boundHost`: undefined (no check) unless that is
 * a loopback address. Otherwise a page on another site can reach the service through a name it
 * rebinds to 127.0.0.1, so a request is refused 403 unless its `Host` is a loopback name or address
 * (localhost, *.localhost, 127.x, [::1]), the bound name or one of `allowedHosts`; and a request that
 * changes something and carries an `Origin` must come from the same origin or from one of those names
 * (a cross-site form or fetch to http://127.0.0.1:port is refused). Answers whether the request may go on.
 */
export function loopbackHostCheck(
  boundHost: string | undefined,
  opts: HostCheckOptions = {},
): ((req: http.IncomingMessage, res: http.ServerResponse) => boolean) | undefined {
  const extra = new Set(opts.allowedHosts ?? []);
  if (!isLoopback(boundHost) || extra.has('*')) return undefined;
  extra.add(boundHost!.toLowerCase());
  const refuse = opts.refuse ?? ((res, status, message) => sendJson(res, { error: { code: 'forbidden_host', message } }, status));
  const allowedName = (hostname: string) => isLoopback(hostname) || hostname.endsWith('.localhost') || extra.has(hostname);
  return (req, res) => {
    const host = req.headers.host;
    const hostname = host === undefined || !HOST_HEADER.test(host) ? undefined : hostnameOf(`http://${host}`);
    if (hostname === undefined || !allowedName(hostname)) {
      refuse(res, 403, `This service answers on localhost only; the Host ${JSON.stringify(host ?? '')} is not allowed (STRATA_ALLOWED_HOSTS names more).`);
      return false;
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !SAFE_METHODS.has(req.method ?? '')) {
      const from = origin === 'null' ? undefined : safeUrl(origin);
      const sameOrigin = from !== undefined && from.host.toLowerCase() === host!.toLowerCase();
      const fromHostname = from && hostnameOf(from.href);
      if (!sameOrigin && (fromHostname === undefined || !allowedName(fromHostname))) {
        refuse(res, 403, `Requests that change something are not accepted from the origin ${JSON.stringify(origin)}.`);
        return false;
      }
    }
    return true;
  };
}

/** The lower-case host name of a URL (brackets kept on IPv6, no trailing dot); undefined when it does not parse. */
function hostnameOf(url: string): string | undefined {
  const parsed = safeUrl(url);
  return parsed?.hostname.toLowerCase().replace(/\.$/, '') || undefined;
}

function safeUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}
