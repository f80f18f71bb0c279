/** A remembered lookup: its promise, and its value once it has one (read without waiting). */
export interface Peeked<V> {
  pending: Promise<V>;
  settled?: { value: V };
}

/**
 * Remembers what `lookup` answered for each key for `ttlMs`, so that hot paths do not pay a round trip
 * (or a query) each. Concurrent misses for one key share a single lookup; a failed lookup is not
 * remembered. At most `maxEntries` keys are kept (the oldest go first).
 */
export function cachedLookup<V>(
  lookup: (key: string) => Promise<V>,
  ttlMs: number,
  opts: {
    /** Told whether each lookup was answered from memory (metrics). */
    onLookup?: (hit: boolean) => void;
    maxEntries?: number;
    /** The clock entries are aged by (tests inject one). */
    now?: () => number;
  } = {},
): ((key: string) => Promise<V>) & { forget(key: string): void; peek(key: string): Peeked<V> | undefined; known(key: string): V | undefined } {
  const entries = new Map<string, { at: number; value: Promise<V>; settled?: { value: V } }>();
  const maxEntries = opts.maxEntries ?? 10_000;
  const clock = opts.now ?? Date.now;
  const get = (key: string): Promise<V> => {
    const now = clock();
    const hit = entries.get(key);
    const fresh = hit !== undefined && now - hit.at < ttlMs;
    opts.onLookup?.(fresh);
    if (fresh) return hit.value;
    const value = lookup(key);
    const entry: { at: number; value: Promise<V>; settled?: { value: V } } = { at: now, value };
    entries.delete(key); // re-inserted last: the Map's order stays oldest first
    entries.set(key, entry);
    value.then(
      (v) => void (entry.settled = { value: v }),
      () => {
        if (entries.get(key) === entry) entries.delete(key);
      },
    );
    if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
    return value;
  };
  /** The fresh entry, if there is one, without a lookup and without counting it (onLookup is not told). */
  const peek = (key: string): Peeked<V> | undefined => {
    const hit = entries.get(key);
    return hit !== undefined && clock() - hit.at < ttlMs ? { pending: hit.value, settled: hit.settled } : undefined;
  };
  /**
   * The fresh entry's value when it has come, counted as the hit `get` would count (hot paths read it without a
   * promise); else undefined, not counted: `get` then looks up (or waits for the lookup under way).
   */
  const known = (key: string): V | undefined => {
    const hit = entries.get(key);
    if (hit?.settled === undefined || clock() - hit.at >= ttlMs) return undefined;
    opts.onLookup?.(true);
    return hit.settled.value;
  };
  return Object.assign(get, { forget: (key: string) => void entries.delete(key), peek, known });
}
