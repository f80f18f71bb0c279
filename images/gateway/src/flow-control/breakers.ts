import CircuitBreaker from 'opossum';
import { type Logger } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { BREAKER_STATE, type FlowMetrics } from './metrics.js';
import { breakerRuleFor, type FlowRules } from './rules.js';

export type BreakerState = keyof typeof BREAKER_STATE;

type Thunk = () => Promise<unknown>;

/** Errors that are the upstream's own failure although they carry a 503 (it could not be reached, it reset). */
const upstreamFailures = new WeakSet<object>();

/** Mark `err` as a failure of the upstream itself (connection refused or reset): it counts against its breaker. */
export function upstreamFailure<E extends Error>(err: E): E {
  upstreamFailures.add(err);
  return err;
}

/**
 * What a breaker does not count: only the upstream's own failures open it (it cannot be reached, it
 * times out, it answers a server fault of its own). Not the caller's fault (4xx); not a refusal it
 * answered by design (501, and 503: SlowDown, flow control, a dependency of its own it reports
 * unavailable, such as a multipart store; 507, its storage full); not a bucket's storage backend being down (the data plane
 * marks those `StorageBackend`), which must never deny every other bucket.
 */
export function isNotUpstreamFault(err: unknown): boolean {
  if (err instanceof Error && upstreamFailures.has(err)) return false;
  if (!(err instanceof S3Error)) return false;
  return err.status < 500 || err.status === 501 || err.status === 503 || err.status === 507 || err.extra.StorageBackend !== undefined;
}

/**
 * One circuit breaker (opossum) per upstream, configured from the rules. `wrap(name, fn)` returns
 * a function that calls `fn` through the breaker of `name`; every function wrapped under one name
 * shares that breaker. Open circuits and timeouts reject at once with S3 `ServiceUnavailable`.
 * On a reload, a breaker whose settings changed is replaced (it starts closed).
 */
export class Breakers {
  private readonly breakers = new Map<string, { fingerprint: string; breaker: CircuitBreaker<[Thunk], unknown> }>();

  constructor(
    private rules: FlowRules,
    private readonly metrics: FlowMetrics,
    private readonly logger: Logger,
  ) {}

  update(rules: FlowRules): void {
    this.rules = rules;
    for (const [name, entry] of this.breakers) {
      if (entry.fingerprint !== this.fingerprint(name)) {
        entry.breaker.shutdown();
        this.breakers.delete(name);
        this.breakerFor(name);
      }
    }
  }

  wrap<A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return (...args: A) => this.run(name, () => fn(...args));
  }

  /** Call `fn` once through the breaker of `name` (for generic callers that `wrap` would not type). */
  async run<R>(name: string, fn: () => Promise<R>): Promise<R> {
    try {
      return (await this.breakerFor(name).fire(fn)) as R;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'EOPENBREAKER') throw new S3Error('ServiceUnavailable', `Upstream ${name} is unavailable; please retry later.`);
      if (code === 'ETIMEDOUT' && err instanceof Error && /^Timed out/.test(err.message)) {
        throw new S3Error('ServiceUnavailable', `Upstream ${name} did not answer in time; please retry later.`);
      }
      throw err;
    }
  }

  state(name: string): BreakerState {
    const breaker = this.breakers.get(name)?.breaker;
    if (!breaker || breaker.closed) return 'closed';
    return breaker.opened ? 'open' : 'halfOpen';
  }

  close(): void {
    for (const { breaker } of this.breakers.values()) breaker.shutdown();
    this.breakers.clear();
  }

  private fingerprint(name: string): string {
    return JSON.stringify(breakerRuleFor(this.rules, name));
  }

  private breakerFor(name: string): CircuitBreaker<[Thunk], unknown> {
    const existing = this.breakers.get(name);
    if (existing) return existing.breaker;
    const rule = breakerRuleFor(this.rules, name);
    const breaker = new CircuitBreaker<[Thunk], unknown>((thunk: Thunk) => thunk(), {
      name,
      timeout: rule.timeout > 0 ? rule.timeout : false,
      errorThresholdPercentage: rule.errorThresholdPercentage,
      resetTimeout: rule.resetTimeout,
      volumeThreshold: rule.volumeThreshold,
      errorFilter: isNotUpstreamFault,
    });
    const transition = (to: BreakerState) => () => {
      this.metrics.breakerState.set({ upstream: name }, BREAKER_STATE[to]);
      this.metrics.breakerTransitions.inc({ upstream: name, to });
      this.logger[to === 'closed' ? 'info' : 'warn']({ upstream: name, state: to }, 'circuit breaker state changed');
    };
    breaker.on('open', transition('open'));
    breaker.on('halfOpen', transition('halfOpen'));
    breaker.on('close', transition('closed'));
    this.metrics.breakerState.set({ upstream: name }, BREAKER_STATE.closed);
    this.breakers.set(name, { fingerprint: this.fingerprint(name), breaker });
    return breaker;
  }
}
