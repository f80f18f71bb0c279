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
    const parts = op.path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
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
 * Server-side apply, simplified: the applied configuration is merged into the live object (objects
 * recursively, lists atomically), and fields this manager applied last time but no longer applies
 * are removed. Other managers' fields stay. Conflicts are not detected: the operator always forces.
 */
export function applyConfiguration(live: Json, applied: Json, previouslyApplied: Json | undefined): Json {
  let out = clone(live);
  if (previouslyApplied !== undefined) out = removeDropped(out, applied, previouslyApplied);
  return mergeApplied(out, applied);
}

function mergeApplied(live: Json, applied: Json): Json {
  if (!isObject(applied) || !isObject(live)) return clone(applied);
  const out = clone(live);
  for (const [key, value] of Object.entries(applied)) out[key] = key in out ? mergeApplied(out[key]!, value) : clone(value);
  return out;
}

function removeDropped(live: Json, applied: Json, previous: Json): Json {
  if (!isObject(live) || !isObject(previous)) return live;
  const appliedObj = isObject(applied) ? applied : {};
  for (const key of Object.keys(previous)) {
    if (!(key in appliedObj)) delete live[key];
    else if (isObject(previous[key]) && isObject(live[key])) live[key] = removeDropped(live[key]!, appliedObj[key]!, previous[key]!);
  }
  return live;
}
