import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedCall {
  method: string;
  path: string;
  token: string | undefined;
  body: unknown;
}

/**
 * A small real HTTP server with the control plane's internal bucket API (ADR 0001): buckets owned by
 * users, objects to count and delete. It records every call for the test to assert on.
 */
export class RecordingControlPlane {
  readonly calls: RecordedCall[] = [];
  /** Scoped keys by name: what the operator last asked for. */
  readonly scopedKeys = new Map<string, Record<string, unknown>>();
  readonly buckets = new Map<string, { owner: string; backend: unknown; objects: string[]; lifecycle?: unknown[]; cors?: unknown[] }>();
  private server?: http.Server;
  url = '';
  /** Answer GET /internal/buckets/:name with statistics (as the real control plane does). */
  withStats = true;

  constructor(readonly token: string) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const body = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
        const url = new URL(req.url ?? '/', 'http://x');
        const token = req.headers['x-strata-internal-token'] as string | undefined;
        this.calls.push({ method: req.method ?? '', path: url.pathname, token, body });
        const send = (status: number, payload?: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(payload === undefined ? '' : JSON.stringify(payload));
        };
        if (token !== this.token) return send(401, { error: { code: 'AccessDenied', message: 'bad token' } });
        // The operator's scoped keys by name (ImageIndex workers' read-only keys), as the control plane keeps them.
        const key = url.pathname.match(/^\/internal\/scoped-keys\/by-name\/([^/]+)$/);
        if (key) {
          const name = decodeURIComponent(key[1]!);
          if (req.method === 'PUT') {
            this.scopedKeys.set(name, body ?? {});
            return send(200, { accessKey: body?.accessKey, parent: body?.parent });
          }
          if (req.method === 'DELETE') {
            this.scopedKeys.delete(name);
            return send(204);
          }
        }
        const m = url.pathname.match(/^\/internal\/buckets\/([^/]+)(\/objects|\/delete-objects|\/lifecycle|\/cors)?$/);
        if (!m) return send(404, { error: { code: 'NoSuchKey', message: 'no route' } });
        const name = decodeURIComponent(m[1]!);
        const bucket = this.buckets.get(name);
        if (req.method === 'PUT' && !m[2]) {
          // The data plane's backend check, as the control plane relays it.
          const backendEndpoint = String((body?.backend as { endpoint?: string } | undefined)?.endpoint ?? '');
          if (!bucket && backendEndpoint.includes('refused'))
            return send(400, { error: { code: 'InvalidArgument', message: 'The minio backend settings are incomplete' } });
          if (!bucket && backendEndpoint.includes('unreachable')) return send(503, { error: { code: 'ServiceUnavailable', message: 'backend unreachable' } });
          if (bucket) {
            const mine = bucket.owner === body?.owner;
            return send(409, { error: { code: mine ? 'BucketAlreadyOwnedByYou' : 'BucketAlreadyExists', message: 'exists' } });
          }
          this.buckets.set(name, { owner: String(body?.owner), backend: body?.backend, objects: [] });
          return send(200, { name, owner: body?.owner });
        }
        if (!bucket) return send(404, { error: { code: 'NoSuchBucket', message: 'no such bucket' } });
        if (req.method === 'GET' && !m[2]) {
          // Statistics as the control plane keeps them (withheld when the test asks: the client then counts).
          return send(200, {
            name,
            owner: bucket.owner,
            backend: bucket.backend,
            ...(this.withStats ? { stats: { objectCount: bucket.objects.length, bytes: bucket.objects.length * 100 } } : {}),
          });
        }
        if (req.method === 'GET' && m[2] === '/objects') {
          const max = Number(url.searchParams.get('maxKeys') ?? 1000);
          const start = Number(url.searchParams.get('continuationToken') ?? 0);
          const page = bucket.objects.slice(start, start + max);
          const more = start + max < bucket.objects.length;
          return send(200, {
            objects: page.map((key) => ({ key })),
            commonPrefixes: [],
            isTruncated: more,
            ...(more ? { nextContinuationToken: String(start + max) } : {}),
          });
        }
        if (m[2] === '/lifecycle' || m[2] === '/cors') {
          const kind = m[2] === '/cors' ? 'cors' : 'lifecycle';
          if (req.method === 'PUT') bucket[kind] = body?.rules as unknown[];
          if (req.method === 'DELETE') delete bucket[kind];
          if (req.method !== 'GET') return send(204);
          const missing = kind === 'cors' ? 'NoSuchCORSConfiguration' : 'NoSuchLifecycleConfiguration';
          return bucket[kind] ? send(200, { rules: bucket[kind] }) : send(404, { error: { code: missing, message: 'none' } });
        }
        if (req.method === 'POST' && m[2] === '/delete-objects') {
          const keys = (body?.keys as string[]) ?? [];
          const gone = new Set(keys);
          bucket.objects = bucket.objects.filter((k) => !gone.has(k));
          return send(200, { deleted: keys, errors: [] });
        }
        if (req.method === 'DELETE' && !m[2]) {
          if (bucket.objects.length) return send(409, { error: { code: 'BucketNotEmpty', message: 'not empty' } });
          this.buckets.delete(name);
          return send(204);
        }
        return send(405, { error: { code: 'MethodNotAllowed', message: 'no' } });
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
