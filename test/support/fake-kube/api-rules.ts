import { isDeepStrictEqual } from 'node:util';
import type { ResourceType } from './resource-types.js';

/** What the API server's validation needs of an object. */
interface Validated {
  kind: string;
  metadata: { name: string };
  [key: string]: unknown;
}

/** A 422 Invalid with the API server's field path. */
export class InvalidError extends Error {}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Name rules of the kinds Strata creates, as apiserver validation applies them: a DNS-1123 subdomain
 * (253) in general; Namespaces a DNS-1123 label, Services a DNS-1035 label (63); a Job's name goes into
 * its pods' job-name label (63); a CronJob's name gets an 11-character suffix for its Jobs (52).
 */
const NAME_RULES: Record<string, { pattern: RegExp; max: number; what: string }> = {
  Namespace: { pattern: DNS1123_LABEL, max: 63, what: 'a lowercase RFC 1123 label' },
  Service: { pattern: DNS1035_LABEL, max: 63, what: 'a DNS-1035 label' },
  Job: { pattern: DNS1123_SUBDOMAIN, max: 63, what: 'a lowercase RFC 1123 subdomain' },
  CronJob: { pattern: DNS1123_SUBDOMAIN, max: 52, what: 'a lowercase RFC 1123 subdomain' },
  StatefulSet: { pattern: DNS1123_LABEL, max: 63, what: 'a lowercase RFC 1123 label' },
};
const DEFAULT_NAME_RULE = { pattern: DNS1123_SUBDOMAIN, max: 253, what: 'a lowercase RFC 1123 subdomain' };

/** Events and Leases carry names the API server accepts as they are (e.g. "pod.17a5c3..."). */
export function checkName(t: ResourceType, obj: Validated): void {
  const rule = NAME_RULES[t.kind] ?? DEFAULT_NAME_RULE;
  const name = obj.metadata.name;
  if (name.length > rule.max) throw new InvalidError(`metadata.name: Invalid value: "${name}": must be no more than ${rule.max} characters`);
  if (!rule.pattern.test(name)) throw new InvalidError(`metadata.name: Invalid value: "${name}": must be ${rule.what}`);
}

const at = (obj: unknown, path: string[]): unknown =>
  path.reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), obj);

/** Fields the API server refuses to change after creation, per kind. */
const IMMUTABLE: Record<string, string[][]> = {
  Job: [
    ['spec', 'template'],
    ['spec', 'selector'],
    ['spec', 'completions'],
  ],
  StatefulSet: [
    ['spec', 'selector'],
    ['spec', 'serviceName'],
    ['spec', 'volumeClaimTemplates'],
    ['spec', 'podManagementPolicy'],
  ],
  Deployment: [['spec', 'selector']],
  PersistentVolumeClaim: [
    ['spec', 'storageClassName'],
    ['spec', 'accessModes'],
    ['spec', 'volumeName'],
  ],
  Service: [['spec', 'clusterIP']],
};

const STORAGE_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

/** A storage quantity in bytes ("10Gi", "500M", "1024"). */
export function storageBytes(quantity: unknown): number {
  const m = /^(\d+(?:\.\d+)?)([kMGTP]i?|Ki)?$/.exec(String(quantity));
  if (!m) throw new InvalidError(`quantity ${JSON.stringify(quantity)} is not a storage quantity`);
  return Number(m[1]) * STORAGE_UNITS[m[2] ?? '']!;
}

/** An update of the main resource that changes an immutable field (or shrinks a claim) is refused. */
export function checkUpdate(t: ResourceType, old: Validated, next: Validated): void {
  for (const path of IMMUTABLE[t.kind] ?? []) {
    const before = at(old, path);
    // Unset before (e.g. a server default not yet filled in) may be set once.
    if (before !== undefined && !isDeepStrictEqual(before, at(next, path))) throw new InvalidError(`${path.join('.')}: Invalid value: field is immutable`);
  }
  if (t.kind === 'PersistentVolumeClaim') {
    const path = ['spec', 'resources', 'requests', 'storage'];
    const before = at(old, path);
    const after = at(next, path);
    if (before !== undefined && after !== undefined && storageBytes(after) < storageBytes(before)) {
      throw new InvalidError(`${path.join('.')}: Forbidden: field can not be less than previous value`);
    }
  }
}
