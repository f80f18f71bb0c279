import type { FlowRules } from './rules.js';

/** Routes that stream a request body up: each holds a connection for as long as its client sends. */
export const UPLOAD_ROUTES: ReadonlySet<string> = new Set(['PutObject', 'UploadPart', 'PostObject']);

/**
 * Requests in flight per route, against the route's limit in the current rules, and uploads in
 * flight per user, against `uploadsPerUser`. Counts are per gateway replica and survive rule reloads
 * (a lowered limit applies to the next request).
 */
export class ConcurrencyLimits {
  private readonly inFlight = new Map<string, number>();
  private readonly uploadsInFlight = new Map<string, number>();

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
   * Take a slot on `route` (and, for an upload, one of `user`'s upload slots): a release function
   * (idempotent) when there is room or no limit applies, null when full.
   */
  tryAcquire(route: string, user?: string): (() => void) | null {
    const releaseUpload = user !== undefined && UPLOAD_ROUTES.has(route) ? this.tryAcquireUpload(user) : () => undefined;
    if (!releaseUpload) return null;
    const limit = this.rules.concurrency.routes[route];
    if (limit === undefined) return releaseUpload;
    const current = this.count(route);
    if (current >= limit) {
      releaseUpload();
      return null;
    }
    this.set(route, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.set(route, this.count(route) - 1);
      releaseUpload();
    };
  }

  private tryAcquireUpload(user: string): (() => void) | null {
    const current = this.uploadsInFlight.get(user) ?? 0;
    if (current >= this.rules.concurrency.uploadsPerUser) return null;
    this.uploadsInFlight.set(user, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.uploadsInFlight.get(user) ?? 1) - 1;
      if (left <= 0) this.uploadsInFlight.delete(user);
      else this.uploadsInFlight.set(user, left);
    };
  }

  private set(route: string, count: number): void {
    if (count <= 0) this.inFlight.delete(route);
    else this.inFlight.set(route, count);
    this.onCount(route, Math.max(0, count));
  }
}
