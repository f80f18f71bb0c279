/** What the ImageIndex reconciler reads from a running index worker. */
export interface IndexWorkerStatus {
  vectors: number;
  bufferSize: number;
}

/** Reads an index worker's state; tests substitute their own. */
export interface IndexWorkerClient {
  status(workerUrl: string): Promise<IndexWorkerStatus>;
}

/** GET /api/index/status of the image-search service. */
export class HttpIndexWorkerClient implements IndexWorkerClient {
  async status(workerUrl: string): Promise<IndexWorkerStatus> {
    const res = await fetch(`${workerUrl}/api/index/status`, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`index worker answered ${res.status}`);
    const body = (await res.json()) as { total_vectors?: number; buffer?: { vectors?: number } };
    return { vectors: body.total_vectors ?? 0, bufferSize: body.buffer?.vectors ?? 0 };
  }
}
