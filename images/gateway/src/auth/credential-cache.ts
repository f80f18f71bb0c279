import type { Credential, CredentialLookup } from './sigv4-verify.js';

/**
 * Remembers secrets looked up from the control plane for a short while, so signed requests do not
 * cost a round trip each; concurrent misses for one key share a single lookup.
 */
export function cachedCredentials(
  lookup: CredentialLookup,
  ttlMs: number,
  /** Told whether each lookup was answered from memory (metrics). */
  onLookup?: (hit: boolean) => void,
): CredentialLookup & { forget(accessKey: string): void } {
  const entries = new Map<string, { at: number; value: Promise<Credential> }>();
  const fn = (accessKey: string) => {
    const now = Date.now();
    const hit = entries.get(accessKey);
    onLookup?.(Boolean(hit && now - hit.at < ttlMs));
    if (hit && now - hit.at < ttlMs) return hit.value;
    const value = lookup(accessKey);
    entries.set(accessKey, { at: now, value });
    value.catch(() => entries.delete(accessKey));
    if (entries.size > 10_000) entries.delete(entries.keys().next().value as string);
    return value;
  };
  return Object.assign(fn, { forget: (accessKey: string) => void entries.delete(accessKey) });
}
