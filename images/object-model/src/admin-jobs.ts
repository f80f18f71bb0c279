/**
 * Long admin work (the purge) runs as a job: the request that starts it answers 202 with the job at
 * once, and its status is read until it is no longer `running` (the control plane's internal API and
 * the gateway's /admin API answer the same shape). A job's failure is its own state, never a failed call,
 * so no circuit breaker counts it and no upstream timeout cuts it.
 */
export interface AdminJob {
  id: string;
  /** What it does, e.g. `purge`. */
  kind: string;
  state: 'running' | 'succeeded' | 'failed';
  startedAt: string;
  finishedAt?: string;
  /** What the work answered, once `succeeded`. */
  result?: unknown;
  /** Why it failed, once `failed`. */
  error?: { code: string; message: string };
}
