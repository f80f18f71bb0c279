/** Patch semantics of the Kubernetes API: JSON merge patch, JSON patch and a server-side-apply merge. */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function clone<T>(v: T): T {
  return structuredClone(v);
}

/** RFC 7386: objects merge recursively, null deletes, everything else (arrays included) replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key] ?? null, value);
  }
  return out;
}

/** RFC 6902 JSON patch (add, remove, replace, test; what client-node's typed patch calls send). */
export function jsonPatch(target: Json, ops: Array<{ op: string; path: string; value?: Json; from?: string }>): Json {
  let doc = clone(target);
  for (const op of ops) {
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (parts.length === 0) {
      if (op.op === 'add' || op.op === 'replace') doc = clone(op.value ?? null);
      continue;
    }
    const last = parts.pop()!;
    let parent: Json = doc;
    for (const p of parts) {
      parent = Array.isArray(parent) ? parent[Number(p)]! : isObject(parent) ? parent[p]! : null;
      if (parent === undefined || parent === null) throw new PatchError(`path ${op.path} not found`);
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (op.op === 'add') parent.splice(index, 0, clone(op.value ?? null));
      else if (op.op === 'remove') parent.splice(index, 1);
      else if (op.op === 'replace') parent[index] = clone(op.value ?? null);
      else if (op.op === 'test' && JSON.stringify(parent[index]) !== JSON.stringify(op.value)) throw new PatchError(`test failed at ${op.path}`);
    } else if (isObject(parent)) {
      if (op.op === 'add' || op.op === 'replace') parent[last] = clone(op.value ?? null);
      else if (op.op === 'remove') {
        if (!(last in parent)) throw new PatchError(`path ${op.path} not found`);
        delete parent[last];
      } else if (op.op === 'test' && JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new PatchError(`test failed at ${op.path}`);
    } else {
      throw new PatchError(`path ${op.path} not found`);
    }
  }
  return doc;
}

export class PatchError extends Error {}

/**
 * Lists that server-side apply merges by key, as the Kubernetes OpenAPI schema marks them
 * (`x-kubernetes-list-type: map`): by field name, the key fields to try in order (a container port
 * is keyed by containerPort, a Service port by port). Every other list is atomic.
 */
const LIST_MAP_KEYS: Record<string, string[]> = {
  containers: ['name'],
  initContainers: ['name'],
  ephemeralContainers: ['name'],
  env: ['name'],
  volumes: ['name'],
  volumeMounts: ['mountPath'],
  imagePullSecrets: ['name'],
  ports: ['containerPort', 'port'],
};

/** The key field of a list that merges by key, when every entry (of both sides) has it. */
function listKey(field: string | undefined, ...lists: Json[][]): string | undefined {
  return LIST_MAP_KEYS[field ?? '']?.find((k) => lists.every((list) => list.every((e) => isObject(e) && k in e)));
}

const keyed = (list: Json[], key: string, value: Json) => list.findIndex((e) => isObject(e) && JSON.stringify(e[key]) === JSON.stringify(value));

/**
 * Server-side apply, simplified: the applied configuration is merged into the live object (objects
 * recursively, lists of containers, env, ports and the like entry by entry by their key, other lists
 * atomically), and fields (and keyed entries) this manager applied last time but no longer applies
 * are removed. Other managers' fields and entries stay. Conflicts are not detected: the operator
 * always forces.
 */
export function applyConfiguration(live: Json, applied: Json, previouslyApplied: Json | undefined): Json {
  let out = clone(live);
  if (previouslyApplied !== undefined) out = removeDropped(out, applied, previouslyApplied);
  return mergeApplied(out, applied);
}

function mergeApplied(live: Json, applied: Json, field?: string): Json {
  if (Array.isArray(applied) && Array.isArray(live)) {
    const key = listKey(field, applied, live);
    if (!key) return clone(applied);
    const out = clone(live);
    for (const entry of applied) {
      const at = keyed(out, key, (entry as JsonObject)[key]!);
      if (at >= 0) out[at] = mergeApplied(out[at]!, entry);
      else out.push(clone(entry));
    }
    return out;
  }
  if (!isObject(applied) || !isObject(live)) return clone(applied);
  const out = clone(live);
  for (const [key, value] of Object.entries(applied)) out[key] = key in out ? mergeApplied(out[key]!, value, key) : clone(value);
  return out;
}

function removeDropped(live: Json, applied: Json, previous: Json, field?: string): Json {
  if (Array.isArray(live) && Array.isArray(previous)) {
    const appliedList = Array.isArray(applied) ? applied : [];
    const key = listKey(field, previous, appliedList, live);
    if (!key) return live;
    const out: Json[] = [];
    for (const entry of live) {
      const id = (entry as JsonObject)[key]!;
      const before = keyed(previous, key, id);
      const now = keyed(appliedList, key, id);
      if (before >= 0 && now < 0) continue;
      out.push(before >= 0 ? removeDropped(entry, appliedList[now]!, previous[before]!) : entry);
    }
    return out;
  }
  if (!isObject(live) || !isObject(previous)) return live;
  const appliedObj = isObject(applied) ? applied : {};
  for (const key of Object.keys(previous)) {
    const keyedList = Array.isArray(previous[key]) && Array.isArray(live[key]) && listKey(key, previous[key] as Json[], live[key] as Json[]);
    if (!(key in appliedObj) && keyedList) {
      // Only this manager's entries go; the list stays while another manager's entries are left.
      const left = removeDropped(live[key]!, [], previous[key]!, key) as Json[];
      if (left.length) live[key] = left;
      else delete live[key];
    } else if (!(key in appliedObj)) delete live[key];
    else if ((isObject(previous[key]) && isObject(live[key])) || (Array.isArray(previous[key]) && Array.isArray(live[key]))) {
      live[key] = removeDropped(live[key]!, appliedObj[key]!, previous[key]!, key);
    }
  }
  return live;
}
