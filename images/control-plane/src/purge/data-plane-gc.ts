/** Asks the data plane to free the bytes of blobs nothing references any more. */
export interface BlobCollector {
  collect(blobIds: number[]): Promise<number>;
}

/** The data plane's `POST /internal/blobs/gc` over HTTP; without a URL nothing is freed now (its own sweep will). */
export class HttpBlobCollector implements BlobCollector {
  constructor(
    private readonly dataPlaneUrl: () => string | undefined,
    private readonly internalToken: string,
  ) {}

  async collect(blobIds: number[]): Promise<number> {
    const base = this.dataPlaneUrl();
    if (!base || blobIds.length === 0) return 0;
    const res = await fetch(`${base}/internal/blobs/gc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-strata-internal-token': this.internalToken },
      body: JSON.stringify({ blobIds }),
    });
    if (!res.ok) throw new Error(`data plane blob GC answered ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { freed: number }).freed;
  }
}
