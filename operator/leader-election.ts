import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import { isConflict, isNotFound } from './kube-client.js';

export interface LeaderElectionOptions {
  namespace: string;
  leaseName: string;
  /** Unique per process (pod name + random suffix). */
  identity: string;
  /** How long a lease is valid without renewal; others take over after it. */
  leaseDurationMs: number;
  /** The leader gives up leadership when it could not renew for this long (< leaseDuration). */
  renewDeadlineMs: number;
  /** How often to try to acquire or renew. */
  retryPeriodMs: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  /**
   * The monotonic clock (ms) that lease expiry and the renew deadline are judged on; production
   * leaves it to performance.now, tests pass a clock they advance instead of waiting a lease out.
   */
  monotonicNow?: () => number;
}

/**
 * Lease timing runs on the monotonic clock (client-go uses Go's monotonic time): a wall clock stepped
 * by NTP or by hand must not make a leader outlive its renew deadline or a candidate take a live lease.
 */
const performanceNow = (): number => performance.now();

/** A request that has not answered within `ms` is given up (its answer, if any, is ignored). */
function withTimeout<T>(request: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`leader election: ${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([request, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease (client-node has no helper), as client-go does
 * it. Writes use the Lease's resourceVersion, so of two candidates racing for an expired lease exactly
 * one wins. Expiry is judged on the local monotonic clock only: a lease is expired when its record has not
 * changed for leaseDuration since this process saw it change (the holder's renewTime comes from
 * another clock and is never compared with ours). Every request is cut off at the renew deadline, so
 * a leader whose renewals hang stops leading before its lease can expire for the others.
 */
export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private leading = false;
  private lastRenew = 0;
  /** The lease record as last read, and when (local clock) it was first seen like that. */
  private observedRecord = '';
  private observedAt = 0;
  private timer?: NodeJS.Timeout;
  private stopped = true;
  private ticking?: Promise<void>;
  private readonly monotonicMs: () => number;

  constructor(
    kc: KubeConfig,
    private readonly opts: LeaderElectionOptions,
    private readonly logger: Logger,
  ) {
    this.api = kc.makeApiClient(CoordinationV1Api);
    this.monotonicMs = opts.monotonicNow ?? performanceNow;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.stopped = false;
    void this.loop();
  }

  /** Stop campaigning. With `release`, a leader hands the lease back so a standby takes over at once. */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    if (this.leading && release) await this.release();
    this.setLeading(false);
  }

  private async loop(): Promise<void> {
    if (this.stopped) return;
    this.ticking = this.tick();
    await this.ticking;
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.loop(), this.opts.retryPeriodMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    // A leader may spend what is left of its renew deadline; a candidate one retry period.
    const budget = this.leading ? Math.max(1, this.lastRenew + this.opts.renewDeadlineMs - this.monotonicMs()) : Math.max(this.opts.retryPeriodMs, 1);
    try {
      const held = await this.tryAcquireOrRenew(this.monotonicMs() + budget);
      if (held) this.lastRenew = this.monotonicMs();
      if (held && !this.leading) this.setLeading(true);
      if (!held && this.leading) this.setLeading(false);
    } catch (err) {
      this.logger.warn({ err }, 'leader election: lease request failed');
    }
    if (this.leading && this.monotonicMs() - this.lastRenew >= this.opts.renewDeadlineMs) this.setLeading(false);
  }

  /** Note the record as read now; returns when it was first seen as it is (local clock). */
  private observe(lease: V1Lease): number {
    const record = JSON.stringify(lease.spec ?? {});
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = this.monotonicMs();
    }
    return this.observedAt;
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.logger.info({ identity: this.opts.identity, lease: this.opts.leaseName }, leading ? 'became leader' : 'stopped leading');
    if (leading) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private async tryAcquireOrRenew(deadline: number): Promise<boolean> {
    const { namespace, leaseName: name, identity } = this.opts;
    const timed = <T>(request: Promise<T>, what: string) => withTimeout(request, Math.max(1, deadline - this.monotonicMs()), what);
    // Lease times are MicroTime: the API server only parses six fractional digits, and a plain Date
    // serializes three ("cannot parse .123Z as .000000", 400). V1MicroTime pads to six.
    const now = new V1MicroTime();
    const durationSeconds = Math.max(1, Math.ceil(this.opts.leaseDurationMs / 1000));
    let lease: V1Lease;
    try {
      lease = await timed(this.api.readNamespacedLease({ namespace, name }), 'reading the lease');
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await timed(
          this.api.createNamespacedLease({
            namespace,
            body: {
              metadata: { name, namespace },
              spec: { holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
            },
          }),
          'creating the lease',
        );
        return true;
      } catch (createErr) {
        if (isConflict(createErr)) return false;
        throw createErr;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const observedAt = this.observe(lease);
    const expired = !holder || observedAt + (spec.leaseDurationSeconds ?? durationSeconds) * 1000 < this.monotonicMs();
    if (holder !== identity && !expired) return false;
    const takingOver = holder !== identity;
    try {
      const written = await timed(
        this.api.replaceNamespacedLease({
          namespace,
          name,
          body: {
            ...lease,
            spec: {
              ...spec,
              holderIdentity: identity,
              leaseDurationSeconds: durationSeconds,
              renewTime: now,
              ...(takingOver ? { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 } : {}),
            },
          },
        }),
        'renewing the lease',
      );
      this.observe(written);
      return true;
    } catch (err) {
      if (isConflict(err)) return false; // someone else wrote first
      throw err;
    }
  }

  private async release(): Promise<void> {
    const { namespace, leaseName: name, identity } = this.opts;
    try {
      const lease = await this.api.readNamespacedLease({ namespace, name });
      if (lease.spec?.holderIdentity !== identity) return;
      await this.api.replaceNamespacedLease({ namespace, name, body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } } });
    } catch (err) {
      this.logger.warn({ err }, 'leader election: could not release the lease');
    }
  }
}
