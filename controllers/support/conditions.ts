import type { Condition } from '../api/index.js';
import { rfc3339 } from './time.js';

export type ConditionType = 'Ready' | 'Progressing' | 'Degraded';

export interface ConditionInput {
  type: ConditionType;
  status: boolean;
  reason: string;
  message: string;
}

/**
 * Set conditions the Kubernetes way: lastTransitionTime only moves when a condition's status changes,
 * every condition carries the generation it describes.
 */
export function setConditions(existing: Condition[] | undefined, inputs: ConditionInput[], generation: number | undefined, now = new Date()): Condition[] {
  const out = [...(existing ?? [])];
  for (const input of inputs) {
    const status = input.status ? 'True' : 'False';
    const index = out.findIndex((c) => c.type === input.type);
    const previous = index >= 0 ? out[index] : undefined;
    const next: Condition = {
      type: input.type,
      status,
      reason: input.reason,
      message: input.message,
      lastTransitionTime: previous && previous.status === status ? previous.lastTransitionTime : rfc3339(now),
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    };
    if (index >= 0) out[index] = next;
    else out.push(next);
  }
  return out;
}

/** The three standard conditions for one of three states of a resource. */
export function stateConditions(state: 'ready' | 'progressing' | 'degraded', reason: string, message: string): ConditionInput[] {
  return [
    { type: 'Ready', status: state === 'ready', reason, message },
    { type: 'Progressing', status: state === 'progressing', reason, message },
    { type: 'Degraded', status: state === 'degraded', reason, message },
  ];
}

export function conditionStatus(conditions: Condition[] | undefined, type: ConditionType): Condition['status'] | undefined {
  return conditions?.find((c) => c.type === type)?.status;
}
