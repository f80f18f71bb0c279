import type { FlowRules } from './rules.js';

/**
 * Requests in flight per route, against the route's limit in the current rules. Counts are per
 * gateway replica and survive rule reloads (a lowered limit applies to the next request).
 */
export class ConcurrencyLimits {
  private readonly inFlight = new Map<string, number>();

  constructor(
    private rules: FlowRules,
    private readonly onCount: (route: string, count: number) => void = () => undefined,
  ) {}

  update(rules: FlowRules): void {
    this.rules = rules;
  }

  count(route: string): number {
    return this.inFlight.get(route) ?? 0;
  }

  /**
   * Take a slot on `route`: a release function (idempotent) when there is room or the route has no
   * limit, null when the route is full.
   */
  tryAcquire(route: string): (() => void) | null {
    const limit = this.rules.concurrency.routes[route];
    if (limit === undefined) return () => undefined;
    const current = this.count(route);
    if (current >= limit) return null;
    this.set(route, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.set(route, this.count(route) - 1);
    };
  }

  private set(route: string, count: number): void {
    if (count <= 0) this.inFlight.delete(route);
    else this.inFlight.set(route, count);
    this.onCount(route, Math.max(0, count));
  }
}
