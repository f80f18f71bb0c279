import CircuitBreaker from 'opossum';
import { type Logger } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { BREAKER_STATE, type FlowMetrics } from './metrics.js';
import { breakerRuleFor, type FlowRules } from './rules.js';

export type BreakerState = keyof typeof BREAKER_STATE;

const keyOf = (name: string, scope?: string) => (scope === undefined ? name : `${name}\u0000${scope}`);

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
 * marks those `StorageBackend`), which must never deny every other bucket; not a call the client
 * ended by going away (AbortError). Waiting for a connection to the upstream is not timed at all
 * (InternalHttp queues calls before they reach the breaker).
 */
export function isNotUpstreamFault(err: unknown): boolean {
  // The client went away (its request's cancellation ended the call): nothing the upstream did.
  if (err instanceof Error && err.name === 'AbortError') return true;
  if (err instanceof Error && upstreamFailures.has(err)) return false;
  if (!(err instanceof S3Error)) return false;
  return err.status < 500 || err.status === 501 || err.status === 503 || err.status === 507 || err.extra.StorageBackend !== undefined;
}

/** Scoped breakers kept at most (one per bucket that had calls); past it the oldest closed one goes. */
const MAX_SCOPED = 1024;

/**
 * One circuit breaker (opossum) per upstream, configured from the rules, and one per upstream and
 * scope (`run(name, fn, scope)`, e.g. the data plane per bucket) with the upstream's settings, so
 * that calls failing for one bucket never open the circuit for another's. `wrap(name, fn)` returns
 * a function that calls `fn` through the breaker of `name`; every function wrapped under one name
 * shares that breaker. Open circuits and timeouts reject at once with S3 `ServiceUnavailable`.
 * On a reload, a breaker whose settings changed is replaced (it starts closed). Metrics name the
 * upstream only (a scope is a tenant's bucket name: unbounded): its state gauge shows the worst of
 * its breakers; logs name the scope too.
 */
export class Breakers {
  private readonly breakers = new Map<string, { upstream: string; scope?: string; fingerprint: string; breaker: CircuitBreaker<[Thunk], unknown> }>();
  private scoped = 0;

  constructor(
    private rules: FlowRules,
    private readonly metrics: FlowMetrics,
    private readonly logger: Logger,
  ) {}

  update(rules: FlowRules): void {
    this.rules = rules;
    for (const [key, entry] of [...this.breakers]) {
      const { upstream, scope } = entry;
      if (entry.fingerprint !== this.fingerprint(upstream)) {
        entry.breaker.shutdown();
        this.breakers.delete(key);
        if (scope === undefined) this.breakerFor(upstream);
        else this.scoped--;
        this.showState(upstream);
      }
    }
  }

  wrap<A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return (...args: A) => this.run(name, () => fn(...args));
  }

  /** Call `fn` once through the breaker of `name` (of `name` and `scope` when given; for generic callers that `wrap` would not type). */
  async run<R>(name: string, fn: () => Promise<R>, scope?: string): Promise<R> {
    try {
      return (await this.breakerFor(name, scope).fire(fn)) as R;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'EOPENBREAKER') throw new S3Error('ServiceUnavailable', `Upstream ${name} is unavailable; please retry later.`);
      if (code === 'ETIMEDOUT' && err instanceof Error && /^Timed out/.test(err.message)) {
        throw new S3Error('ServiceUnavailable', `Upstream ${name} did not answer in time; please retry later.`);
      }
      throw err;
    }
  }

  state(name: string, scope?: string): BreakerState {
    const breaker = this.breakers.get(keyOf(name, scope))?.breaker;
    return breaker ? this.stateOf(breaker) : 'closed';
  }

  close(): void {
    for (const { breaker } of this.breakers.values()) breaker.shutdown();
    this.breakers.clear();
    this.scoped = 0;
  }

  private fingerprint(name: string): string {
    return JSON.stringify(breakerRuleFor(this.rules, name));
  }

  private breakerFor(name: string, scope?: string): CircuitBreaker<[Thunk], unknown> {
    const key = keyOf(name, scope);
    const existing = this.breakers.get(key);
    if (existing) return existing.breaker;
    if (scope !== undefined) this.makeRoomForScoped();
    const rule = breakerRuleFor(this.rules, name);
    const breaker = new CircuitBreaker<[Thunk], unknown>((thunk: Thunk) => thunk(), {
      name: key,
      timeout: rule.timeout > 0 ? rule.timeout : false,
      errorThresholdPercentage: rule.errorThresholdPercentage,
      resetTimeout: rule.resetTimeout,
      volumeThreshold: rule.volumeThreshold,
      errorFilter: isNotUpstreamFault,
    });
    const transition = (to: BreakerState) => () => {
      this.showState(name);
      this.metrics.breakerTransitions.inc({ upstream: name, to });
      this.logger[to === 'closed' ? 'info' : 'warn']({ upstream: name, ...(scope !== undefined ? { scope } : {}), state: to }, 'circuit breaker state changed');
    };
    breaker.on('open', transition('open'));
    breaker.on('halfOpen', transition('halfOpen'));
    breaker.on('close', transition('closed'));
    if (scope !== undefined) this.scoped++;
    this.breakers.set(key, { upstream: name, scope, fingerprint: this.fingerprint(name), breaker });
    this.showState(name);
    return breaker;
  }

  /** The state gauge of an upstream: the worst of its breakers' (its own and its scopes'). */
  private showState(upstream: string): void {
    let worst = 0;
    for (const entry of this.breakers.values()) {
      if (entry.upstream === upstream) worst = Math.max(worst, BREAKER_STATE[this.stateOf(entry.breaker)]);
    }
    this.metrics.breakerState.set({ upstream }, worst);
  }

  private stateOf(breaker: CircuitBreaker<[Thunk], unknown>): BreakerState {
    if (breaker.closed) return 'closed';
    return breaker.opened ? 'open' : 'halfOpen';
  }

  /** Drop the oldest closed scoped breaker once MAX_SCOPED are kept (a closed one holds nothing worth keeping). */
  private makeRoomForScoped(): void {
    if (this.scoped < MAX_SCOPED) return;
    for (const [key, entry] of this.breakers) {
      if (entry.scope !== undefined && entry.breaker.closed) {
        entry.breaker.shutdown();
        this.breakers.delete(key);
        this.scoped--;
        return;
      }
    }
  }
}
