import type { FlowRules } from './rules.js';
import { FairPool, type ShareRefusal } from '../../../service-kit/src/fair-pool.js';

/** Routes that stream a request body up: each holds a connection for as long as its client sends. */
export const UPLOAD_ROUTES: ReadonlySet<string> = new Set(['PutObject', 'UploadPart', 'PostObject']);

/** Routes that stream an answer down: each holds a connection for as long as its client reads. */
export const READ_ROUTES: ReadonlySet<string> = new Set(['GetObject']);

/** Why a request was refused a slot: its route's limit, or its tenant's share of the reads or uploads. */
export type ConcurrencyRefusal = { scope: 'route' } | { scope: 'reads' | 'uploads'; reason: ShareRefusal };

/** The release of a request that took no share (one function for all: none made per request). */
const NOTHING_TO_RELEASE = (): void => undefined;

/**
 * Requests in flight per route, against the route's limit in the current rules, and streamed reads
 * and uploads per tenant, in pools shared fairly between tenants (service-kit's fair-pool.ts: `readsPerUser` /
 * `uploadsPerUser` each, `readPool` / `uploadPool` in all). Counts are per gateway replica and survive
 * rule reloads (a lowered limit applies to the next request).
 */
export class ConcurrencyLimits {
  private readonly inFlight = new Map<string, number>();
  private readonly reads: FairPool;
  private readonly uploads: FairPool;

  constructor(
    private rules: FlowRules,
    private readonly onCount: (route: string, count: number) => void = () => undefined,
  ) {
    const c = rules.concurrency;
    this.reads = new FairPool(c.readPool, c.readsPerUser);
    this.uploads = new FairPool(c.uploadPool, c.uploadsPerUser);
  }

  update(rules: FlowRules): void {
    this.rules = rules;
    const c = rules.concurrency;
    this.reads.resize(c.readPool, c.readsPerUser);
    this.uploads.resize(c.uploadPool, c.uploadsPerUser);
  }

  count(route: string): number {
    return this.inFlight.get(route) ?? 0;
  }

  /**
   * Take a slot on `route` (and, for a streamed read or upload, one of `tenant`'s share): a release
   * function (idempotent) when there is room or no limit applies, else why not. `tenant` is the user,
   * or for anonymous callers their address.
   */
  tryAcquire(route: string, tenant?: string): (() => void) | ConcurrencyRefusal {
    let releaseShare = NOTHING_TO_RELEASE;
    const pool = tenant === undefined ? undefined : UPLOAD_ROUTES.has(route) ? this.uploads : READ_ROUTES.has(route) ? this.reads : undefined;
    if (pool && tenant !== undefined) {
      const taken = pool.tryTake(tenant);
      if (typeof taken === 'string') return { scope: pool === this.uploads ? 'uploads' : 'reads', reason: taken };
      releaseShare = taken;
    }
    const limit = this.rules.concurrency.routes[route];
    if (limit === undefined) return releaseShare;
    const current = this.count(route);
    if (current >= limit) {
      releaseShare();
      return { scope: 'route' };
    }
    this.set(route, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.set(route, this.count(route) - 1);
      releaseShare();
    };
  }

  private set(route: string, count: number): void {
    if (count <= 0) this.inFlight.delete(route);
    else this.inFlight.set(route, count);
    this.onCount(route, Math.max(0, count));
  }
}
