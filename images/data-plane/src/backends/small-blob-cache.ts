/**
 * The bytes of small blobs read recently, in memory: bounded in bytes, least recently used out first.
 *
 * A blob never changes once written (every write gets a new random locator), so an entry stays
 * valid until its blob is deleted, which evicts it: no invalidation protocol, and data-plane
 * replicas need no coordination. For a small object the three thread-pool round trips of a file
 * read (open, read, close) cost more of the event loop than the rest of the data plane's GET.
 */
export class SmallBlobCache {
  /** Insertion order is recency order: a hit moves its entry to the end. */
  private readonly entries = new Map<string, Buffer>();
  private held = 0;

  constructor(
    /** Most bytes held in all. */
    readonly maxBytes: number,
    /** Largest blob kept. */
    readonly maxBlobBytes: number,
    /** Told whether each lookup was answered from memory (metrics). */
    private readonly onLookup?: (hit: boolean) => void,
  ) {}

  get(locator: string): Buffer | undefined {
    const bytes = this.entries.get(locator);
    this.onLookup?.(bytes !== undefined);
    if (bytes !== undefined) {
      this.entries.delete(locator);
      this.entries.set(locator, bytes);
    }
    return bytes;
  }

  /** Keep a copy of a whole blob's bytes (a copy: `bytes` may be a view of a larger buffer). */
  set(locator: string, bytes: Buffer): void {
    if (bytes.length > this.maxBlobBytes || bytes.length > this.maxBytes) return;
    this.delete(locator);
    // Outside Node's shared allocation pool, so that an entry holds exactly its own bytes.
    const copy = Buffer.allocUnsafeSlow(bytes.length);
    bytes.copy(copy);
    this.entries.set(locator, copy);
    this.held += copy.length;
    for (const [oldest, old] of this.entries) {
      if (this.held <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.held -= old.length;
    }
  }

  delete(locator: string): void {
    const bytes = this.entries.get(locator);
    if (bytes === undefined) return;
    this.entries.delete(locator);
    this.held -= bytes.length;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.size;
  }
}
