import CircuitBreaker from 'opossum';
import { S3Error } from '../../../object-model/src/index.js';

export interface BackendBreakerSettings {
  /** Failure percentage over the rolling window that opens the circuit. */
  errorThresholdPercentage: number;
  /** Calls in the window before it may open at all. */
  volumeThreshold: number;
  /** ms open before one trial call (half-open): how soon a recovered backend is used again. */
  resetTimeout: number;
}

export const DEFAULT_BACKEND_BREAKER: BackendBreakerSettings = { errorThresholdPercentage: 50, volumeThreshold: 5, resetTimeout: 1000 };

/** A backend failure that says the backend cannot serve now (the backend marks it `StorageBackend`). */
export const isBackendUnavailable = (err: unknown): boolean => err instanceof S3Error && err.extra.StorageBackend !== undefined;

/**
 * One circuit breaker per storage backend: once a backend keeps failing (unreachable, silent past its
 * idle timeout, overloaded), calls to it fail at once with ServiceUnavailable marked `StorageBackend`
 * (which the gateway's breaker does not count) instead of each waiting for the timeout; every other
 * backend, and so every other bucket, is untouched. Only unavailability counts, never a missing blob
 * or bad settings. Timeouts are the backend client's own (idle sockets), not the breaker's. (Its
 * timers do not hold the process open.)
 */
export class BackendBreaker {
  private readonly breaker: CircuitBreaker<[() => Promise<unknown>], unknown>;

  constructor(
    private readonly backendKey: string,
    private readonly kind: string,
    settings: BackendBreakerSettings = DEFAULT_BACKEND_BREAKER,
  ) {
    this.breaker = new CircuitBreaker<[() => Promise<unknown>], unknown>((fn) => fn(), {
      name: backendKey,
      timeout: false,
      ...settings,
      errorFilter: (err: unknown) => !isBackendUnavailable(err),
    });
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return (await this.breaker.fire(fn)) as T;
    } catch (err) {
      if ((err as { code?: string }).code === 'EOPENBREAKER') {
        throw new S3Error('ServiceUnavailable', `The storage backend ${this.backendKey} is unavailable; please retry later.`, { StorageBackend: this.kind });
      }
      throw err;
    }
  }
}
