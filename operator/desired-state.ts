import { createHash } from 'node:crypto';
import type { KubeObject } from '../controllers/support/kube-client.js';
import { normalize } from '../controllers/support/status-writer.js';

/** Annotation with the hash of the configuration the operator last applied to an object. */
export const APPLIED_HASH_ANNOTATION = 'strata.dev/applied-hash';

export function desiredHash(obj: KubeObject): string {
  const { [APPLIED_HASH_ANNOTATION]: _ignored, ...annotations } = obj.metadata.annotations ?? {};
  const config = { ...obj, metadata: { ...obj.metadata, annotations } };
  return createHash('sha256')
    .update(JSON.stringify(normalize(config)))
    .digest('hex')
    .slice(0, 32);
}

/** `obj` with its configuration's hash in the applied-hash annotation. */
export function withDesiredHash<T extends KubeObject>(obj: T): T {
  return { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [APPLIED_HASH_ANNOTATION]: desiredHash(obj) } } };
}

/**
 * Whether every field of `desired` holds in `live` with the same value (lists element by element, of
 * the same length). The API server adds defaults and status, which do not count; an edit of a field
 * the operator sets does.
 */
export function holdsIn(desired: unknown, live: unknown): boolean {
  if (Array.isArray(desired)) return Array.isArray(live) && live.length === desired.length && desired.every((d, i) => holdsIn(d, live[i]));
  if (desired && typeof desired === 'object') {
    if (!live || typeof live !== 'object' || Array.isArray(live)) return false;
    return Object.entries(desired).every(([k, v]) => v === undefined || holdsIn(v, (live as Record<string, unknown>)[k]));
  }
  return desired === live;
}

/**
 * Whether applying `desired` (carrying its hash) would change nothing: the live object was applied
 * from the same configuration (same hash) and has not drifted from it since.
 */
export function isUpToDate(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live) return false;
  const hash = desired.metadata.annotations?.[APPLIED_HASH_ANNOTATION];
  return hash !== undefined && live.metadata.annotations?.[APPLIED_HASH_ANNOTATION] === hash && holdsIn(JSON.parse(JSON.stringify(desired)), live);
}
