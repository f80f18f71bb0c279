import { requestSignal } from '../support/reconcile-signal.js';

/** What the ImageIndex reconciler reads from a running index worker. */
export interface IndexWorkerStatus {
  vectors: number;
  bufferSize: number;
  /** A merge or rebuild is running inside the worker (started by a Job or through its API). */
  busy?: boolean;
}

/** Reads an index worker's state; tests substitute their own. */
export interface IndexWorkerClient {
  status(workerUrl: string): Promise<IndexWorkerStatus>;
}

/** GET /api/index/status of the image-search service. */
export class HttpIndexWorkerClient implements IndexWorkerClient {
  async status(workerUrl: string): Promise<IndexWorkerStatus> {
    const res = await fetch(`${workerUrl}/api/index/status`, { signal: requestSignal(10_000) });
    if (!res.ok) throw new Error(`index worker answered ${res.status}`);
    const body = (await res.json()) as { totalVectors?: number; buffer?: { vectors?: number }; job?: { state?: string } | null };
    return { vectors: body.totalVectors ?? 0, bufferSize: body.buffer?.vectors ?? 0, busy: body.job?.state === 'running' };
  }
}
