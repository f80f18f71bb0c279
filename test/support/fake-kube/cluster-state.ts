import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { InvalidError, checkName, checkUpdate } from './api-rules.js';
import { applyConfiguration, clone, isObject, type Json } from './patches.js';
import { BUILTIN_TYPES, apiVersionOf, typesFromCrd, type ResourceType } from './resource-types.js';
import { CustomResourceSchemas } from './schema-validation.js';

/** What any stored object looks like. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    resourceVersion: string;
    generation: number;
    creationTimestamp: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ uid: string; kind: string; name: string; apiVersion: string; controller?: boolean }>;
    managedFields?: unknown[];
    generateName?: string;
  };
  [key: string]: unknown;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export interface WatchEvent {
  type: WatchEventType;
  object: KubeObject;
  resourceVersion: number;
  typeKey: string;
}

/** An API error with the Kubernetes Status reason and HTTP code. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

const typeKeyOf = (t: ResourceType) => `${t.group}/${t.plural}`;
const objectKey = (t: ResourceType, ns: string | undefined, name: string) => `${typeKeyOf(t)}/${ns ?? ''}/${name}`;

/** Everything but metadata and status: a change there bumps metadata.generation. */
function specPart(obj: KubeObject): string {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return JSON.stringify(rest);
}

/** The API server's 422 for what its validation refuses. */
function asInvalid(t: ResourceType, name: string, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (err instanceof InvalidError) throw new ApiError(422, 'Invalid', `${t.kind}${t.group ? `.${t.group}` : ''} "${name}" is invalid: ${err.message}`);
    throw err;
  }
}

function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** metav1.MicroTime fields: the API server decodes them with RFC3339Micro, six fractional digits exactly. */
const MICRO_TIME_FIELDS: Record<string, string[][]> = {
  'coordination.k8s.io/Lease': [
    ['spec', 'acquireTime'],
    ['spec', 'renewTime'],
  ],
  '/Event': [['eventTime']],
};
const RFC3339_MICRO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

/** Refuse what the real decoder refuses (400), e.g. a JavaScript Date's three-digit toISOString(). */
function checkMicroTimes(t: ResourceType, obj: KubeObject): void {
  for (const fieldPath of MICRO_TIME_FIELDS[`${t.group}/${t.kind}`] ?? []) {
    let value: unknown = obj;
    for (const key of fieldPath) value = isObject(value as Json) ? (value as Record<string, unknown>)[key] : undefined;
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string' || !RFC3339_MICRO.test(value)) {
      throw new ApiError(
        400,
        'BadRequest',
        `${t.kind} in version "${t.version}" cannot be handled as a ${t.kind}: parsing time ${JSON.stringify(value)} as "2006-01-02T15:04:05.000000Z07:00" (${fieldPath.join('.')})`,
      );
    }
  }
}

/**
 * The fake API server's storage: typed objects with resourceVersion, generation, finalizers,
 * deletionTimestamp, status subresource rules, owner-reference garbage collection and a watch log.
 */
export class ClusterState extends EventEmitter {
  private readonly types = new Map<string, ResourceType>();
  private readonly objects = new Map<string, KubeObject>();
  /** Refuse creating namespaced objects in a namespace that does not exist, as a real API server does. */
  requireNamespaces = false;
  /** Evaluate the CRDs' transition rules on updates (false: an API server, or a CRD, without them). */
  celTransitionRules = true;
  /** Per object key, per field manager: the configuration it applied last (server-side apply). */
  private readonly appliedConfigs = new Map<string, Map<string, Json>>();
  private readonly log: WatchEvent[] = [];
  private readonly schemas = new CustomResourceSchemas();
  private revision = 1;

  constructor() {
    super();
    this.setMaxListeners(0);
    for (const t of BUILTIN_TYPES) this.registerType(t);
  }

  registerType(t: ResourceType): void {
    this.types.set(`${apiVersionOf(t)}/${t.plural}`, t);
  }

  allTypes(): ResourceType[] {
    return [...this.types.values()];
  }

  typeFor(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(`${group ? `${group}/` : ''}${version}/${plural}`);
  }

  typeForKind(apiVersion: string, kind: string): ResourceType {
    const t = this.allTypes().find((x) => apiVersionOf(x) === apiVersion && x.kind === kind);
    if (!t) throw new ApiError(404, 'NotFound', `the server could not find the requested resource (${apiVersion} ${kind})`);
    return t;
  }

  currentRevision(): number {
    return this.revision;
  }

  /** Events of a type after the given revision (for a watch that resumes). Undefined when compacted away. */
  eventsSince(t: ResourceType, revision: number): WatchEvent[] | undefined {
    const oldest = this.log[0]?.resourceVersion ?? this.revision + 1;
    if (revision < oldest - 1 && this.log.length >= 10_000) return undefined;
    return this.log.filter((e) => e.typeKey === typeKeyOf(t) && e.resourceVersion > revision);
  }

  get(t: ResourceType, ns: string | undefined, name: string): KubeObject {
    const obj = this.objects.get(objectKey(t, ns, name));
    if (!obj) throw new ApiError(404, 'NotFound', `${t.plural}${t.group ? `.${t.group}` : ''} "${name}" not found`);
    return clone(obj);
  }

  tryGet(t: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    const obj = this.objects.get(objectKey(t, ns, name));
    return obj && clone(obj);
  }

  list(t: ResourceType, ns?: string): KubeObject[] {
    const prefix = `${typeKeyOf(t)}/`;
    return [...this.objects.entries()]
      .filter(([k, o]) => k.startsWith(prefix) && (ns === undefined || o.metadata.namespace === ns))
      .map(([, o]) => clone(o))
      .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
  }

  create(t: ResourceType, ns: string | undefined, body: KubeObject, fieldManager?: string): KubeObject {
    const obj = clone(body);
    obj.metadata ??= {} as KubeObject['metadata'];
    if (!obj.metadata.name && obj.metadata.generateName) obj.metadata.name = obj.metadata.generateName + randomUUID().slice(0, 5);
    if (!obj.metadata.name) throw new ApiError(422, 'Invalid', `${t.kind}: metadata.name: Required value`);
    if (t.namespaced) {
      if (obj.metadata.namespace && ns && obj.metadata.namespace !== ns)
        throw new ApiError(400, 'BadRequest', 'the namespace of the object does not match the namespace on the request');
      obj.metadata.namespace = ns ?? obj.metadata.namespace;
      if (!obj.metadata.namespace) throw new ApiError(400, 'BadRequest', 'namespace required');
    } else {
      delete obj.metadata.namespace;
    }
    const key = objectKey(t, obj.metadata.namespace, obj.metadata.name);
    if (this.objects.has(key)) throw new ApiError(409, 'AlreadyExists', `${t.plural} "${obj.metadata.name}" already exists`);
    obj.apiVersion = apiVersionOf(t);
    obj.kind = t.kind;
    if (t.statusSubresource) delete obj.status;
    this.validate(t, obj);
    asInvalid(t, obj.metadata.name, () => checkName(t, obj));
    // NamespaceLifecycle admission: nothing is created in a namespace that does not exist (opt-in:
    // most tests use namespaces they never create).
    if (t.namespaced && this.requireNamespaces && !this.objects.has(objectKey(this.typeForKind('v1', 'Namespace'), undefined, obj.metadata.namespace!))) {
      throw new ApiError(404, 'NotFound', `namespaces "${obj.metadata.namespace}" not found`);
    }
    if (t.namespaced && this.namespaceTerminating(obj.metadata.namespace!)) {
      throw new ApiError(
        403,
        'Forbidden',
        `${t.plural} "${obj.metadata.name}" is forbidden: unable to create new content in namespace ${obj.metadata.namespace} because it is being terminated`,
      );
    }
    Object.assign(obj.metadata, {
      uid: randomUUID(),
      creationTimestamp: now(),
      generation: 1,
      resourceVersion: String(++this.revision),
    });
    delete obj.metadata.deletionTimestamp;
    this.setManagedFields(obj, fieldManager ?? 'unknown', 'Update');
    this.objects.set(key, obj);
    if (t.kind === 'CustomResourceDefinition') {
      for (const crdType of typesFromCrd(obj as never)) this.registerType(crdType);
      this.schemas.register(obj as never);
    }
    this.record(t, 'ADDED', obj);
    return clone(obj);
  }

  /**
   * Replace an object (PUT). On the main resource status is kept from the stored object when the type
   * has a status subresource; on /status only status changes. Optimistic concurrency by resourceVersion.
   */
  update(t: ResourceType, ns: string | undefined, name: string, body: KubeObject, subresource?: 'status', fieldManager?: string): KubeObject {
    const key = objectKey(t, ns, name);
    const old = this.objects.get(key);
    if (!old) throw new ApiError(404, 'NotFound', `${t.plural} "${name}" not found`);
    const rv = body.metadata?.resourceVersion;
    if (rv && rv !== old.metadata.resourceVersion) {
      throw new ApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${t.plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    let next: KubeObject;
    if (subresource === 'status') {
      next = clone(old);
      if (body.status === undefined) delete next.status;
      else next.status = clone(body.status);
    } else {
      next = clone(body);
      next.metadata = { ...clone(body.metadata ?? {}) } as KubeObject['metadata'];
      if (t.statusSubresource) {
        if (old.status === undefined) delete next.status;
        else next.status = clone(old.status);
      }
      // Fields the server owns.
      next.metadata.name = old.metadata.name;
      next.metadata.uid = old.metadata.uid;
      next.metadata.creationTimestamp = old.metadata.creationTimestamp;
      if (old.metadata.namespace) next.metadata.namespace = old.metadata.namespace;
      if (old.metadata.deletionTimestamp) next.metadata.deletionTimestamp = old.metadata.deletionTimestamp;
      else delete next.metadata.deletionTimestamp;
      next.apiVersion = old.apiVersion;
      next.kind = old.kind;
      asInvalid(t, name, () => checkUpdate(t, old, next));
    }
    this.validate(t, next);
    if (subresource !== 'status' && this.celTransitionRules) {
      const broken = this.schemas.transitionProblems(apiVersionOf(t), t.kind, old, next);
      if (broken.length) throw new ApiError(422, 'Invalid', `${t.kind}.${t.group} "${name}" is invalid: ${broken.join('; ')}`);
    }
    next.metadata.generation = specPart(next) !== specPart(old) ? old.metadata.generation + 1 : old.metadata.generation;
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    next.metadata.managedFields = old.metadata.managedFields;
    if (JSON.stringify(next) === JSON.stringify(old)) return clone(old); // a no-op write is not an event
    if (fieldManager) this.setManagedFields(next, fieldManager, 'Update');
    next.metadata.resourceVersion = String(++this.revision);
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
      this.remove(t, key, next);
      return clone(next);
    }
    this.objects.set(key, next);
    this.record(t, 'MODIFIED', next);
    return clone(next);
  }

  /** Server-side apply: create when absent, else merge the configuration as the given manager. */
  apply(t: ResourceType, ns: string | undefined, name: string, config: KubeObject, fieldManager: string, subresource?: 'status'): KubeObject {
    const key = objectKey(t, ns, name);
    const managers = this.appliedConfigs.get(key) ?? new Map<string, Json>();
    const configKey = subresource ? `${fieldManager}/status` : fieldManager;
    const stripped = clone(config) as unknown as Json & Record<string, Json>;
    const live = this.objects.get(key);
    let result: KubeObject;
    if (!live) {
      if (subresource) throw new ApiError(404, 'NotFound', `${t.plural} "${name}" not found`);
      result = this.create(
        t,
        ns,
        { ...(stripped as unknown as KubeObject), metadata: { ...(config.metadata ?? {}), name } as KubeObject['metadata'] },
        fieldManager,
      );
    } else {
      const merged = applyConfiguration(live as unknown as Json, stripped, managers.get(configKey)) as unknown as KubeObject;
      merged.metadata.resourceVersion = live.metadata.resourceVersion;
      result = this.update(t, ns, name, merged, subresource, undefined);
    }
    managers.set(configKey, stripped);
    this.appliedConfigs.set(key, managers);
    const stored = this.objects.get(key);
    if (stored) this.setManagedFields(stored, fieldManager, 'Apply');
    return stored ? clone(stored) : result;
  }

  /** DELETE: with finalizers the object only gets a deletionTimestamp; without, it goes (and its dependents after it). */
  delete(t: ResourceType, ns: string | undefined, name: string): KubeObject {
    const key = objectKey(t, ns, name);
    const old = this.objects.get(key);
    if (!old) throw new ApiError(404, 'NotFound', `${t.plural} "${name}" not found`);
    if (t.kind === 'Namespace' && t.group === '') return this.terminateNamespace(t, key, old);
    if (old.metadata.finalizers?.length) {
      if (old.metadata.deletionTimestamp) return clone(old);
      const next = clone(old);
      next.metadata.deletionTimestamp = now();
      next.metadata.resourceVersion = String(++this.revision);
      this.objects.set(key, next);
      this.record(t, 'MODIFIED', next);
      return clone(next);
    }
    const gone = clone(old);
    gone.metadata.resourceVersion = String(++this.revision);
    this.remove(t, key, gone);
    return clone(gone);
  }

  private remove(t: ResourceType, key: string, obj: KubeObject): void {
    this.objects.delete(key);
    this.appliedConfigs.delete(key);
    this.record(t, 'DELETED', obj);
    // A deleted CRD takes its objects with it and its API stops being served.
    if (t.kind === 'CustomResourceDefinition') {
      for (const crdType of typesFromCrd(obj as never)) {
        const prefix = `${typeKeyOf(crdType)}/`;
        for (const k of [...this.objects.keys()].filter((k) => k.startsWith(prefix))) this.objects.delete(k);
        this.types.delete(`${apiVersionOf(crdType)}/${crdType.plural}`);
      }
    }
    // The garbage collector runs in the background, as in a real cluster.
    setImmediate(() => this.collectGarbage());
    if (obj.metadata.namespace) this.finishNamespaceIfEmpty(obj.metadata.namespace);
  }

  private namespaceTerminating(ns: string): boolean {
    return Boolean(this.objects.get(objectKey(this.typeForKind('v1', 'Namespace'), undefined, ns))?.metadata.deletionTimestamp);
  }

  private contentOf(ns: string): Array<[ResourceType, KubeObject]> {
    return [...this.objects.values()].filter((o) => o.metadata.namespace === ns).map((o) => [this.typeForKind(o.apiVersion, o.kind), o]);
  }

  /**
   * The namespace controller: a deleted Namespace turns Terminating, everything in it is deleted
   * (objects with finalizers wait for them), and the Namespace goes once it is empty.
   */
  private terminateNamespace(t: ResourceType, key: string, old: KubeObject): KubeObject {
    if (!old.metadata.deletionTimestamp) {
      const next = clone(old);
      next.metadata.deletionTimestamp = now();
      next.status = { ...(isObject(next.status as Json) ? (next.status as object) : {}), phase: 'Terminating' };
      next.metadata.resourceVersion = String(++this.revision);
      this.objects.set(key, next);
      this.record(t, 'MODIFIED', next);
    }
    const ns = old.metadata.name;
    for (const [type, obj] of this.contentOf(ns)) if (this.objects.has(objectKey(type, ns, obj.metadata.name))) this.delete(type, ns, obj.metadata.name);
    this.finishNamespaceIfEmpty(ns);
    return clone(this.objects.get(key) ?? old);
  }

  private finishNamespaceIfEmpty(ns: string): void {
    const t = this.typeForKind('v1', 'Namespace');
    const key = objectKey(t, undefined, ns);
    const namespace = this.objects.get(key);
    if (!namespace?.metadata.deletionTimestamp || this.contentOf(ns).length > 0) return;
    const gone = clone(namespace);
    gone.metadata.resourceVersion = String(++this.revision);
    this.objects.delete(key);
    this.record(t, 'DELETED', gone);
  }

  /** Delete every object whose owners are all gone (background propagation). */
  collectGarbage(): void {
    const liveUids = new Set([...this.objects.values()].map((o) => o.metadata.uid));
    for (const [key, obj] of [...this.objects.entries()]) {
      const owners = obj.metadata.ownerReferences ?? [];
      if (owners.length === 0 || owners.some((o) => liveUids.has(o.uid))) continue;
      const t = this.typeForKind(obj.apiVersion, obj.kind);
      if (this.objects.has(key)) this.delete(t, obj.metadata.namespace, obj.metadata.name);
    }
  }

  /** Custom resources: schema defaults applied, invalid objects refused as the API server does. */
  private validate(t: ResourceType, obj: KubeObject): void {
    checkMicroTimes(t, obj);
    // ValidateOwnerReferences: every reference names its owner completely, uid included.
    for (const ref of obj.metadata.ownerReferences ?? []) {
      for (const field of ['apiVersion', 'kind', 'name', 'uid'] as const) {
        if (!ref[field])
          throw new ApiError(
            422,
            'Invalid',
            `${t.kind}.${t.group} "${obj.metadata.name}" is invalid: metadata.ownerReferences.${field}: Invalid value: "": ${field} must not be empty`,
          );
      }
    }
    const problems = this.schemas.check(apiVersionOf(t), t.kind, obj);
    if (problems.length) throw new ApiError(422, 'Invalid', `${t.kind}.${t.group} "${obj.metadata.name}" is invalid: ${problems.join('; ')}`);
  }

  private setManagedFields(obj: KubeObject, manager: string, operation: 'Apply' | 'Update'): void {
    const others = (obj.metadata.managedFields ?? []).filter((m) => !(isObject(m as Json) && (m as { manager?: string }).manager === manager));
    obj.metadata.managedFields = [...others, { manager, operation, apiVersion: obj.apiVersion, time: now(), fieldsType: 'FieldsV1', fieldsV1: {} }];
  }

  private record(t: ResourceType, type: WatchEventType, obj: KubeObject): void {
    const event: WatchEvent = { type, object: clone(obj), resourceVersion: Number(obj.metadata.resourceVersion), typeKey: typeKeyOf(t) };
    this.log.push(event);
    if (this.log.length > 10_000) this.log.shift();
    this.emit('event', event);
  }
}
