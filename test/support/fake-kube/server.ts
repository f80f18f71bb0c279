import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiError, ClusterState, type KubeObject, type WatchEvent } from './cluster-state.js';
import { PatchError, jsonPatch, mergePatch, type Json } from './patches.js';
import { apiVersionOf, type ResourceType } from './resource-types.js';

/** What an authorizer decides on (the attributes of a Kubernetes resource request). */
export interface RequestAttributes {
  verb: 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

interface Route {
  type: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: 'status';
}

function requestAttributes(method: string, route: Route, q: URLSearchParams): RequestAttributes {
  const watch = q.get('watch') === 'true' || q.get('watch') === '1';
  const verbs: Record<string, RequestAttributes['verb']> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
  const verb = method === 'GET' ? (route.name ? 'get' : watch ? 'watch' : 'list') : (verbs[method] ?? 'get');
  return {
    verb,
    group: route.type.group,
    resource: route.type.plural,
    ...(route.subresource ? { subresource: route.subresource } : {}),
    ...(route.namespace ? { namespace: route.namespace } : {}),
    ...(route.name ? { name: route.name } : {}),
  };
}

/** `a=b,c!=d,e` label selectors (equality, inequality and existence; what the operator uses). */
function matchesLabels(obj: KubeObject, selector: string | null): boolean {
  if (!selector) return true;
  const labels = obj.metadata.labels ?? {};
  return selector.split(',').every((term) => {
    const t = term.trim();
    if (!t) return true;
    const ne = t.split('!=');
    if (ne.length === 2) return labels[ne[0]!.trim()] !== ne[1]!.trim();
    const eq = t.split(/==?/);
    if (eq.length === 2) return labels[eq[0]!.trim()] === eq[1]!.trim();
    if (t.startsWith('!')) return !(t.slice(1) in labels);
    return t in labels;
  });
}

function matchesFields(obj: KubeObject, selector: string | null): boolean {
  if (!selector) return true;
  return selector.split(',').every((term) => {
    const [field, value] = term.split(/==?/);
    if (field === 'metadata.name') return obj.metadata.name === value;
    if (field === 'metadata.namespace') return obj.metadata.namespace === value;
    return true;
  });
}

/**
 * An in-process Kubernetes API server over HTTP: discovery, list/watch (chunked streams, resume by
 * resourceVersion), create, get, update, delete, merge/strategic/JSON patch, server-side apply,
 * status subresources, finalizers and garbage collection. `@kubernetes/client-node` runs against it
 * unmodified through `kubeConfig()`.
 */
export class FakeKubeServer {
  readonly state = new ClusterState();
  private server?: http.Server;
  private readonly watches = new Set<http.ServerResponse>();
  /** While true, watch streams stay open but deliver nothing (a silent informer). */
  silenceWatches = false;
  /** Counts requests by "METHOD path-without-query", for tests that assert on traffic. */
  readonly requests: string[] = [];
  /** Fault injection: a status code to fail a request with (e.g. 503 for an unreachable etcd), or undefined. */
  failRequests?: (method: string, path: string) => number | undefined;
  /** Fault injection: a request this answers true for hangs (no answer) until it answers false; `user` is the caller's bearer token. */
  hangRequests?: (method: string, path: string, user: string) => boolean;
  /**
   * Fault injection: a list this answers true for is read when it arrives but answered only once this
   * answers false (a slow response, older than the watch events sent meanwhile).
   */
  holdListAnswers?: (path: string) => boolean;
  /**
   * RBAC: when set, every resource request is authorized with the caller's bearer token and its
   * attributes (as the API server's authorizer sees them); a refusal answers 403 and is remembered
   * in `denied`. Discovery is open to everyone, as system:discovery makes it.
   */
  authorize?: (user: string, attrs: RequestAttributes) => boolean;
  readonly denied: Array<RequestAttributes & { user: string }> = [];
  url = '';

  constructor(crds: object[] = []) {
    for (const crd of crds) this.state.create(this.state.typeForKind('apiextensions.k8s.io/v1', 'CustomResourceDefinition'), undefined, crd as KubeObject);
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => this.fail(res, err));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.watches) res.end();
    this.watches.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Close every open watch stream (clients must re-watch). */
  dropWatches(): void {
    for (const res of this.watches) res.end();
    this.watches.clear();
  }

  /** A client config for this server; `token` names the user (what `authorize` sees). */
  kubeConfig(token = 'fake-token'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'tester', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'tester', namespace: 'default' }],
      currentContext: 'fake',
    });
    return kc;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    this.requests.push(`${req.method} ${url.pathname}`);
    const caller = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    while (this.hangRequests?.(req.method ?? 'GET', url.pathname, caller)) await new Promise((r) => setTimeout(r, 20));
    const injected = this.failRequests?.(req.method ?? 'GET', url.pathname);
    if (injected) throw new ApiError(injected, injected === 503 ? 'ServiceUnavailable' : 'InternalError', `injected failure for ${req.method} ${url.pathname}`);
    const parts = url.pathname.split('/').filter(Boolean);
    if (req.method === 'GET' && this.discovery(parts, res)) return;
    const route = this.route(parts);
    if (!route) throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    const q = url.searchParams;
    const { type, namespace, name, subresource } = route;
    const body = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(req.method ?? '') ? await readBody(req) : '';
    if (this.authorize) this.authorizeRequest(req, route, q, body);
    switch (req.method) {
      case 'GET':
        if (name) return this.send(res, 200, this.state.get(type, namespace, name));
        if (q.get('watch') === 'true' || q.get('watch') === '1') return this.watch(req, res, route, q);
        {
          const list = this.listOf(type, namespace, q);
          while (this.holdListAnswers?.(url.pathname)) await new Promise((r) => setTimeout(r, 20));
          return this.send(res, 200, list);
        }
      case 'POST':
        if (name) throw new ApiError(405, 'MethodNotAllowed', 'POST on a named resource');
        return this.send(res, 201, this.state.create(type, namespace, parseJson(body), q.get('fieldManager') ?? undefined));
      case 'PUT':
        if (!name) throw new ApiError(405, 'MethodNotAllowed', 'PUT on a collection');
        return this.send(res, 200, this.state.update(type, namespace, name, parseJson(body), subresource, q.get('fieldManager') ?? undefined));
      case 'PATCH':
        if (!name) throw new ApiError(405, 'MethodNotAllowed', 'PATCH on a collection');
        return this.send(res, 200, this.patch(route as Required<Pick<Route, 'name'>> & Route, req.headers['content-type'] ?? '', body, q));
      case 'DELETE': {
        if (!name) throw new ApiError(405, 'MethodNotAllowed', 'DELETE on a collection');
        const result = this.state.delete(type, namespace, name);
        return this.send(res, 200, result);
      }
      default:
        throw new ApiError(405, 'MethodNotAllowed', `method ${req.method} not allowed`);
    }
  }

  /**
   * The authorizer's checks for one request: its own verb; `create` as well for a server-side apply
   * that creates; and, as the OwnerReferencesPermissionEnforcement admission plugin does, `update` of
   * the owner's `finalizers` subresource for every owner reference with blockOwnerDeletion.
   */
  private authorizeRequest(req: http.IncomingMessage, route: Route, q: URLSearchParams, body: string): void {
    const user = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const method = req.method ?? 'GET';
    const attrs = requestAttributes(method, route, q);
    const checks: RequestAttributes[] = [attrs];
    const isApply = (req.headers['content-type'] ?? '').startsWith('application/apply-patch+yaml');
    if (method === 'PATCH' && isApply && route.name && !this.state.tryGet(route.type, route.namespace, route.name)) checks.push({ ...attrs, verb: 'create' });
    if (['POST', 'PUT', 'PATCH'].includes(method) && body) {
      let written: { metadata?: { ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; blockOwnerDeletion?: boolean }> } } | undefined;
      try {
        written = (isApply ? parseYaml(body) : JSON.parse(body)) as typeof written;
      } catch {
        written = undefined;
      }
      for (const ref of written?.metadata?.ownerReferences ?? []) {
        if (!ref.blockOwnerDeletion) continue;
        const owner = this.state.allTypes().find((t) => apiVersionOf(t) === ref.apiVersion && t.kind === ref.kind);
        if (owner)
          checks.push({ verb: 'update', group: owner.group, resource: owner.plural, subresource: 'finalizers', namespace: route.namespace, name: ref.name });
      }
    }
    for (const check of checks) {
      if (this.authorize!(user, check)) continue;
      this.denied.push({ user, ...check });
      const what = `${check.resource}${check.subresource ? `/${check.subresource}` : ''}`;
      throw new ApiError(
        403,
        'Forbidden',
        `${what}${check.group ? `.${check.group}` : ''} is forbidden: User "${user}" cannot ${check.verb} resource "${what}" in API group "${check.group}"${check.namespace ? ` in the namespace "${check.namespace}"` : ' at the cluster scope'}`,
      );
    }
  }

  private patch(route: Route & { name: string }, contentType: string, body: string, q: URLSearchParams): KubeObject {
    const { type, namespace, name, subresource } = route;
    const ct = contentType.split(';')[0]!.trim();
    if (ct === 'application/apply-patch+yaml') {
      const fieldManager = q.get('fieldManager');
      if (!fieldManager) throw new ApiError(400, 'BadRequest', 'PATCH, application/apply-patch+yaml requires fieldManager');
      const config = parseYaml(body) as KubeObject;
      return this.state.apply(type, namespace, name, config, fieldManager, subresource);
    }
    const live = this.state.get(type, namespace, name);
    let next: Json;
    try {
      if (ct === 'application/merge-patch+json' || ct === 'application/strategic-merge-patch+json')
        next = mergePatch(live as unknown as Json, JSON.parse(body) as Json);
      else if (ct === 'application/json-patch+json') next = jsonPatch(live as unknown as Json, JSON.parse(body) as never);
      else
        throw new ApiError(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got ${ct})`,
        );
    } catch (err) {
      if (err instanceof PatchError || err instanceof SyntaxError) throw new ApiError(422, 'Invalid', err.message);
      throw err;
    }
    const patched = next as unknown as KubeObject;
    // A patch never conflicts unless it names a resourceVersion itself.
    if (!(JSON.parse(body) as { metadata?: { resourceVersion?: string } })?.metadata?.resourceVersion)
      patched.metadata.resourceVersion = live.metadata.resourceVersion;
    return this.state.update(type, namespace, name, patched, subresource, q.get('fieldManager') ?? undefined);
  }

  private listOf(type: ResourceType, namespace: string | undefined, q: URLSearchParams) {
    const items = this.state.list(type, namespace).filter((o) => matchesLabels(o, q.get('labelSelector')) && matchesFields(o, q.get('fieldSelector')));
    return { apiVersion: apiVersionOf(type), kind: `${type.kind}List`, metadata: { resourceVersion: String(this.state.currentRevision()) }, items };
  }

  private watch(req: http.IncomingMessage, res: http.ServerResponse, route: Route, q: URLSearchParams): void {
    const { type, namespace } = route;
    const selects = (o: KubeObject) =>
      (namespace === undefined || o.metadata.namespace === namespace) && matchesLabels(o, q.get('labelSelector')) && matchesFields(o, q.get('fieldSelector'));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    const write = (event: { type: string; object: unknown }) => {
      if (!this.silenceWatches) res.write(`${JSON.stringify(event)}\n`);
    };
    const since = q.get('resourceVersion');
    if (!since || since === '0') {
      for (const o of this.state.list(type, namespace)) if (selects(o)) write({ type: 'ADDED', object: o });
    } else {
      const backlog = this.state.eventsSince(type, Number(since));
      if (!backlog) {
        write({
          type: 'ERROR',
          object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: `too old resource version: ${since}` },
        });
        res.end();
        return;
      }
      for (const e of backlog) if (selects(e.object)) write({ type: e.type, object: e.object });
    }
    const typeKey = `${type.group}/${type.plural}`;
    const onEvent = (e: WatchEvent) => {
      if (e.typeKey === typeKey && selects(e.object)) write({ type: e.type, object: e.object });
    };
    this.state.on('event', onEvent);
    this.watches.add(res);
    const timeout = Number(q.get('timeoutSeconds') ?? 0);
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    const cleanup = () => {
      this.state.off('event', onEvent);
      this.watches.delete(res);
      if (timer) clearTimeout(timer);
    };
    res.on('close', cleanup);
    req.on('close', cleanup);
  }

  /** Answer /api, /apis, /api/v1, /apis/<group>/<version> and /version. */
  private discovery(parts: string[], res: http.ServerResponse): boolean {
    const types = this.state.allTypes();
    const resourceList = (groupVersion: string, list: ResourceType[]) => ({
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion,
      resources: list.flatMap((t) => [
        {
          name: t.plural,
          singularName: t.singular,
          namespaced: t.namespaced,
          kind: t.kind,
          verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
          ...(t.shortNames ? { shortNames: t.shortNames } : {}),
        },
        ...(t.statusSubresource
          ? [{ name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] }]
          : []),
      ]),
    });
    if (parts.length === 1 && parts[0] === 'version') {
      this.send(res, 200, { major: '1', minor: '31', gitVersion: 'v1.31.0-fake', platform: 'linux/amd64' });
      return true;
    }
    if (parts.length === 1 && parts[0] === 'api') {
      this.send(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
      return true;
    }
    if (parts.length === 2 && parts[0] === 'api' && parts[1] === 'v1') {
      this.send(
        res,
        200,
        resourceList(
          'v1',
          types.filter((t) => t.group === ''),
        ),
      );
      return true;
    }
    if (parts.length === 1 && parts[0] === 'apis') {
      const groups = new Map<string, Set<string>>();
      for (const t of types) if (t.group) groups.set(t.group, (groups.get(t.group) ?? new Set()).add(t.version));
      this.send(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [...groups].map(([name, versions]) => {
          const vs = [...versions].map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
          return { name, versions: vs, preferredVersion: vs[0] };
        }),
      });
      return true;
    }
    if (parts.length === 3 && parts[0] === 'apis') {
      const list = types.filter((t) => t.group === parts[1] && t.version === parts[2]);
      if (list.length === 0) return false;
      this.send(res, 200, resourceList(`${parts[1]}/${parts[2]}`, list));
      return true;
    }
    return false;
  }

  /** /api/v1/... or /apis/<g>/<v>/... → resource type, namespace, name, subresource. */
  private route(parts: string[]): Route | undefined {
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === 'api') [group, version, rest] = ['', parts[1] ?? '', parts.slice(2)];
    else if (parts[0] === 'apis') [group, version, rest] = [parts[1] ?? '', parts[2] ?? '', parts.slice(3)];
    else return undefined;
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const type = this.state.typeFor(group, version, rest[0] ?? '');
    if (!type || rest.length > 3) return undefined;
    if (rest[2] !== undefined && rest[2] !== 'status') return undefined;
    return { type, namespace: type.namespaced ? namespace : undefined, name: rest[1], subresource: rest[2] as 'status' | undefined };
  }

  private send(res: http.ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private fail(res: http.ServerResponse, err: unknown): void {
    const e = err instanceof ApiError ? err : new ApiError(500, 'InternalError', err instanceof Error ? err.message : String(err));
    if (res.headersSent) {
      res.end();
      return;
    }
    this.send(res, e.code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: e.message, reason: e.reason, code: e.code });
  }
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(body: string): KubeObject {
  try {
    return JSON.parse(body) as KubeObject;
  } catch {
    throw new ApiError(400, 'BadRequest', 'the request body is not valid JSON');
  }
}
