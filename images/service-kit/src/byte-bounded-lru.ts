/**
 * Values bounded by their total size in bytes, least recently used out first: the shape of the
 * in-memory caches of small bodies (the data plane's blob bytes, the gateway's small-object answers).
 * A Map's insertion order is the recency order: a use moves its entry to the end.
 */
export class ByteBoundedLru<V> {
  private readonly entries = new Map<string, V>();
  private held = 0;

  constructor(
    /** Most bytes held in all. */
    readonly maxBytes: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  /** The value, without counting it as used. */
  peek(id: string): V | undefined {
    return this.entries.get(id);
  }

  /** The value, now the most recently used. */
  use(id: string): V | undefined {
    const value = this.entries.get(id);
    if (value !== undefined) {
      this.entries.delete(id);
      this.entries.set(id, value);
    }
    return value;
  }

  /** Keep `value` (replacing what `id` held), evicting the least recently used past maxBytes; one larger than maxBytes is not kept. */
  set(id: string, value: V): void {
    this.delete(id);
    const size = this.sizeOf(value);
    if (size > this.maxBytes) return;
    this.entries.set(id, value);
    this.held += size;
    for (const [oldest, old] of this.entries) {
      if (this.held <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.held -= this.sizeOf(old);
    }
  }

  delete(id: string): void {
    const value = this.entries.get(id);
    if (value === undefined) return;
    this.entries.delete(id);
    this.held -= this.sizeOf(value);
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  /** Entries held now. */
  get size(): number {
    return this.entries.size;
  }
}
