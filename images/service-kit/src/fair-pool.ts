/** Why a fair pool refused a slot: the tenant's own cap, its share of a contended pool, or a full pool. */
export type ShareRefusal = 'tenant-cap' | 'share' | 'pool-full';

/** How long a refused tenant still counts as wanting slots (so that its share is kept free for it). */
const DEMAND_MS = 5_000;

/**
 * A pool of slots (streamed reads, or uploads, in flight) shared fairly between tenants.
 *
 * A tenant may hold at most `perTenant` slots, and at most its share of the pool: `size / active`,
 * where `active` counts the tenants holding slots, those refused in the last few seconds (they want
 * some) and the one asking. A tenant that took many slots while the pool was quiet keeps them (they
 * are not taken back), but takes no more while others want theirs: the slots it frees (answers that
 * end, or that the minimum transfer rate cuts) go to the tenants below their share. So however many
 * accounts hold slots they do not use, a tenant that asks is refused for at most as long as their
 * slots last, which the transfer rate bounds, and never because of their overflow.
 */
export class FairPool {
  private readonly held = new Map<string, number>();
  private total = 0;
  /** Refused tenants, by the time of their last refusal. */
  private readonly wanting = new Map<string, number>();
  private wantingOnly = 0;
  private prunedAt = 0;

  constructor(
    private size: number,
    private perTenant: number,
  ) {}

  resize(size: number, perTenant: number): void {
    this.size = size;
    this.perTenant = perTenant;
  }

  inUse(): number {
    return this.total;
  }

  heldBy(tenant: string): number {
    return this.held.get(tenant) ?? 0;
  }

  /** A release function (idempotent) when `tenant` may take a slot, else why not. */
  tryTake(tenant: string, now = Date.now()): (() => void) | ShareRefusal {
    const mine = this.heldBy(tenant);
    const refusal = this.refusal(tenant, mine, now);
    if (refusal) {
      this.want(tenant, now);
      return refusal;
    }
    this.held.set(tenant, mine + 1);
    this.total++;
    if (this.wanting.delete(tenant) && mine === 0) this.wantingOnly--;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = this.heldBy(tenant) - 1;
      if (left <= 0) {
        this.held.delete(tenant);
        if (this.wanting.has(tenant)) this.wantingOnly++;
      } else this.held.set(tenant, left);
    };
  }

  private refusal(tenant: string, mine: number, now: number): ShareRefusal | undefined {
    if (mine >= this.perTenant) return 'tenant-cap';
    this.prune(now);
    const asking = this.held.has(tenant) || this.wanting.has(tenant) ? 0 : 1;
    const active = this.held.size + this.wantingOnly + asking;
    if (mine >= Math.max(1, Math.floor(this.size / active))) return 'share';
    if (this.total >= this.size) return 'pool-full';
    return undefined;
  }

  private want(tenant: string, now: number): void {
    if (!this.wanting.has(tenant) && !this.held.has(tenant)) this.wantingOnly++;
    this.wanting.set(tenant, now);
  }

  /** Forget refusals older than DEMAND_MS and recount the wanting tenants that hold nothing (at most once a second). */
  private prune(now: number): void {
    if (now - this.prunedAt < 1000) return;
    this.prunedAt = now;
    let only = 0;
    for (const [tenant, at] of this.wanting) {
      if (now - at > DEMAND_MS) this.wanting.delete(tenant);
      else if (!this.held.has(tenant)) only++;
    }
    this.wantingOnly = only;
  }
}
