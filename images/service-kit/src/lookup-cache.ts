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
  } = {},
): ((key: string) => Promise<V>) & { forget(key: string): void; peek(key: string): Promise<V> | undefined } {
  const entries = new Map<string, { at: number; value: Promise<V> }>();
  const maxEntries = opts.maxEntries ?? 10_000;
  const get = (key: string): Promise<V> => {
    const now = Date.now();
    const hit = entries.get(key);
    const fresh = hit !== undefined && now - hit.at < ttlMs;
    opts.onLookup?.(fresh);
    if (fresh) return hit.value;
    const value = lookup(key);
    entries.delete(key); // re-inserted last: the Map's order stays oldest first
    entries.set(key, { at: now, value });
    value.catch(() => {
      if (entries.get(key)?.value === value) entries.delete(key);
    });
    if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
    return value;
  };
  /** The fresh entry, if there is one, without a lookup and without counting it (onLookup is not told). */
  const peek = (key: string): Promise<V> | undefined => {
    const hit = entries.get(key);
    return hit !== undefined && Date.now() - hit.at < ttlMs ? hit.value : undefined;
  };
  return Object.assign(get, { forget: (key: string) => void entries.delete(key), peek });
}
