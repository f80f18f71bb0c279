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
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease (client-node has no helper). Writes use the
 * Lease's resourceVersion, so of two candidates racing for an expired lease exactly one wins.
 */
export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private leading = false;
  private lastRenew = 0;
  private timer?: NodeJS.Timeout;
  private stopped = true;
  private ticking?: Promise<void>;

  constructor(
    kc: KubeConfig,
    private readonly opts: LeaderElectionOptions,
    private readonly logger: Logger,
  ) {
    this.api = kc.makeApiClient(CoordinationV1Api);
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
    try {
      const held = await this.tryAcquireOrRenew();
      if (held) this.lastRenew = Date.now();
      if (held && !this.leading) this.setLeading(true);
      if (!held && this.leading) this.setLeading(false);
    } catch (err) {
      this.logger.warn({ err }, 'leader election: lease request failed');
      if (this.leading && Date.now() - this.lastRenew > this.opts.renewDeadlineMs) this.setLeading(false);
    }
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.logger.info({ identity: this.opts.identity, lease: this.opts.leaseName }, leading ? 'became leader' : 'stopped leading');
    if (leading) this.opts.onStartedLeading();
    else this.opts.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, leaseName: name, identity } = this.opts;
    // Lease times are MicroTime: the API server only parses six fractional digits, and a plain Date
    // serializes three ("cannot parse .123Z as .000000", 400). V1MicroTime pads to six.
    const now = new V1MicroTime();
    const durationSeconds = Math.max(1, Math.ceil(this.opts.leaseDurationMs / 1000));
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: { holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
        });
        return true;
      } catch (createErr) {
        if (isConflict(createErr)) return false;
        throw createErr;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const renewedAt = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = !holder || renewedAt + (spec.leaseDurationSeconds ?? durationSeconds) * 1000 < now.getTime();
    if (holder !== identity && !expired) return false;
    const takingOver = holder !== identity;
    try {
      await this.api.replaceNamespacedLease({
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
      });
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
