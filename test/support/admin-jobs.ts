import { expect } from 'chai';
import type { AdminJob } from '../../images/object-model/src/index.js';

/** What a purge job answers once it succeeded. */
export interface PurgeResult {
  purged: number;
  freedBlobs: number;
  expiredObjects: number;
  abortedUploads: number;
}

/**
 * The job a 202 answer started, read with `status(id)` until it is no longer running (the gateway's
 * answers wrap it in `data`, the internal API's do not).
 */
export async function finishedJob(started: Response, status: (id: string) => Promise<Response>): Promise<AdminJob> {
  const unwrap = (body: unknown) => ((body as { data?: AdminJob }).data ?? body) as AdminJob;
  expect(started.status, await started.clone().text()).to.equal(202);
  let job = unwrap(await started.json());
  while (job.state === 'running') {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const res = await status(job.id);
    expect(res.status, await res.clone().text()).to.equal(200);
    job = unwrap(await res.json());
  }
  return job;
}

/** The result of a succeeded job (fails the test on a failed one). */
function resultOf<T>(job: AdminJob): T {
  expect(job.state, JSON.stringify(job.error)).to.equal('succeeded');
  return job.result as T;
}

type InternalFetch = (method: string, path: string, body?: unknown) => Promise<Response>;

/** POST /internal/purge of a control plane (its `cpFetch`), waited for: what the purge answered. */
export async function internalPurge(cpFetch: InternalFetch, body: { now?: string } = {}): Promise<PurgeResult> {
  return resultOf(await finishedJob(await cpFetch('POST', '/internal/purge', body), (id) => cpFetch('GET', `/internal/jobs/${id}`)));
}

/** POST /admin/purge through the gateway at `endpoint` with `headers` (the root's), waited for: what the purge answered. */
export async function adminPurge(endpoint: string, headers: Record<string, string>, body: { now?: string } = {}): Promise<PurgeResult> {
  const started = await fetch(`${endpoint}/admin/purge`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return resultOf(await finishedJob(started, (id) => fetch(`${endpoint}/admin/jobs/${id}`, { headers })));
}
