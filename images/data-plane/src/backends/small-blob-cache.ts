import { ByteBoundedLru } from '../../../service-kit/src/byte-bounded-lru.js';

/**
 * The bytes of small blobs read recently, in memory: bounded in bytes, least recently used out first.
 *
 * A blob never changes once written (every write gets a new random locator), so an entry stays
 * valid until its blob is deleted, which evicts it: no invalidation protocol, and data-plane
 * replicas need no coordination. For a small object the three thread-pool round trips of a file
 * read (open, read, close) cost more of the event loop than the rest of the data plane's GET.
 */
export class SmallBlobCache {
  private readonly entries: ByteBoundedLru<Buffer>;

  constructor(
    /** Most bytes held in all. */
    readonly maxBytes: number,
    /** Largest blob kept. */
    readonly maxBlobBytes: number,
    /** Told whether each lookup was answered from memory (metrics). */
    private readonly onLookup?: (hit: boolean) => void,
  ) {
    this.entries = new ByteBoundedLru(maxBytes, (bytes) => bytes.length);
  }

  get(locator: string): Buffer | undefined {
    const bytes = this.entries.use(locator);
    this.onLookup?.(bytes !== undefined);
    return bytes;
  }

  /** Keep a copy of a whole blob's bytes (a copy: `bytes` may be a view of a larger buffer). */
  set(locator: string, bytes: Buffer): void {
    if (bytes.length > this.maxBlobBytes || bytes.length > this.maxBytes) return;
    // Outside Node's shared allocation pool, so that an entry holds exactly its own bytes.
    const copy = Buffer.allocUnsafeSlow(bytes.length);
    bytes.copy(copy);
    this.entries.set(locator, copy);
  }

  delete(locator: string): void {
    this.entries.delete(locator);
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.entries.bytes;
  }

  get size(): number {
    return this.entries.size;
  }
}
