import type { ZodType } from 'zod';
import { nameProblem, type Condition, type CustomResourceKind } from '../api/index.js';
import { conditionStatus, setConditions, stateConditions } from './conditions.js';
import { refOf, type EventRecorder, type KubeClient, type KubeObject } from './kube-client.js';
import { statusPatch } from './ownership.js';

export interface StatusUpdate<S> {
  /** Kind-specific status fields (conditions and observedGeneration are added here). */
  fields: Omit<S, 'conditions' | 'observedGeneration'>;
  state: 'ready' | 'progressing' | 'degraded';
  reason: string;
  message: string;
}

/**
 * Write a resource's status when it differs from what is stored (no write, no event otherwise), and
 * record an Event when the Ready condition changes: level-based status, edge-triggered events.
 */
export async function writeStatus<S extends { conditions?: Condition[]; observedGeneration?: number }>(
  kube: KubeClient,
  events: EventRecorder,
  obj: KubeObject & { status?: S },
  update: StatusUpdate<S>,
): Promise<void> {
  const generation = obj.metadata.generation;
  const previous = obj.status;
  const conditions = setConditions(previous?.conditions, stateConditions(update.state, update.reason, update.message), generation);
  const next = { ...update.fields, observedGeneration: generation, conditions } as unknown as S;
  if (JSON.stringify(normalize(previous)) === JSON.stringify(normalize(next))) return;
  await kube.patchStatus(refOf(obj), statusPatch(previous, next));
  obj.status = next;
  const wasReady = conditionStatus(previous?.conditions, 'Ready');
  const isReady = conditionStatus(conditions, 'Ready');
  if (wasReady !== isReady || conditionStatus(previous?.conditions, 'Degraded') !== conditionStatus(conditions, 'Degraded')) {
    await events.event(obj, update.state === 'degraded' ? 'Warning' : 'Normal', update.reason, update.message);
  }
}

/**
 * The resource's spec as its schema reads it. A spec the schema refuses, or a name too long or not
 * DNS-1035 where the kind's derived names need it (given `kind`), is written to status as Degraded
 * (InvalidSpec, InvalidName) and answers undefined: nothing more is done until the resource changes.
 */
export async function checkedSpec<T>(
  kube: KubeClient,
  events: EventRecorder,
  obj: KubeObject & { spec?: unknown; status?: { conditions?: Condition[]; observedGeneration?: number } },
  schema: ZodType<T>,
  kind?: CustomResourceKind,
): Promise<T | undefined> {
  const parsed = schema.safeParse(obj.spec ?? {});
  const badName = parsed.success && kind ? nameProblem(kind, obj.metadata.name) : undefined;
  if (parsed.success && !badName) return parsed.data;
  const [reason, message] = parsed.success ? ['InvalidName', badName!] : ['InvalidSpec', parsed.error.message];
  await writeStatus(kube, events, obj, { fields: {}, state: 'degraded', reason, message });
  return undefined;
}

/** Sorted keys and no undefined values, so that equal values (statuses, configurations) compare equal. */
export function normalize(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalize);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, normalize(v)]),
    );
  }
  return value;
}
