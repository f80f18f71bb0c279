import { cachedLookup } from '../../../service-kit/src/index.js';
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
): CredentialLookup & { forget(accessKey: string): void; known(accessKey: string): Credential | undefined } {
  return cachedLookup(lookup, ttlMs, { onLookup });
}
