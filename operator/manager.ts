import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../images/service-kit/src/index.js';
import type { Reconciler } from '../controllers/support/reconciler.js';
import { ControllerRunner, type RunnerOptions } from './controller-runner.js';
import { SharedInformerFactory } from './shared-informer.js';
import { LeaderElector, type LeaderElectionOptions } from './leader-election.js';
import type { OperatorMetrics } from './metrics.js';

export interface ManagerOptions extends Omit<RunnerOptions, 'logger' | 'metrics'> {
  logger: Logger;
  metrics: OperatorMetrics;
  reconcilers: Reconciler[];
  /** The informers the reconcilers' cached client reads from; the manager makes its own when unset. */
  informers?: SharedInformerFactory;
  /** Without it every replica reconciles (fine for one replica and for tests). */
  leaderElection?: Omit<LeaderElectionOptions, 'onStartedLeading' | 'onStoppedLeading'>;
  /**
   * Called once the lease is lost (not handed back by stop()) and the reconciles in flight have been
   * aborted: the operator exits non-zero here, as controller-runtime's manager does, so that nothing
   * of the old term outlives it. Without it the manager keeps campaigning (tests).
   */
  onLeadershipLost?: () => void;
}

/**
 * The operator's manager: runs every controller while this replica leads (all the time without
 * leader election), stops them when leadership is lost, and shuts down gracefully.
 */
export class Manager {
  private runners: ControllerRunner[] = [];
  private elector?: LeaderElector;
  private transition: Promise<void> = Promise.resolve();
  private started = false;
  private resyncTimer?: NodeJS.Timeout;
  private readonly informers: SharedInformerFactory;

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: ManagerOptions,
  ) {
    this.informers = opts.informers ?? new SharedInformerFactory(kc, opts.logger);
  }

  get isLeader(): boolean {
    return this.elector ? this.elector.isLeader : this.started;
  }

  /** Controllers running in this replica now (zero while standing by). */
  get runningControllers(): number {
    return this.runners.length;
  }

  /** Ready once every controller's informers have synced; a standby replica is ready too (it serves metrics and waits to lead). */
  get isReady(): boolean {
    const controllersSynced = this.runners.length === this.opts.reconcilers.length && this.runners.every((r) => r.hasSynced);
    return this.started && (!this.isLeader || controllersSynced);
  }

  start(): void {
    this.started = true;
    const { leaderElection, logger, metrics } = this.opts;
    if (!leaderElection) {
      this.serialize(() => this.startControllers());
      return;
    }
    this.elector = new LeaderElector(
      this.kc,
      {
        ...leaderElection,
        onStartedLeading: () => {
          metrics.isLeader.set(1);
          this.serialize(() => this.startControllers());
        },
        onStoppedLeading: () => {
          metrics.isLeader.set(0);
          this.serialize(() => this.stopControllers());
          if (this.started && this.opts.onLeadershipLost) void this.leadershipLost(this.opts.onLeadershipLost, leaderElection);
        },
      },
      logger,
    );
    this.elector.start();
  }

  /**
   * Stop reconciling, wait for in-flight reconciles, and only then hand the lease back: a standby
   * must never start while this replica still reconciles.
   */
  async stop(): Promise<void> {
    this.started = false;
    this.serialize(() => this.stopControllers());
    await this.transition;
    if (this.elector) await this.elector.stop(true);
    await this.transition;
  }

  /** Stop without releasing the lease, as a crashed process would (tests use this). */
  async abandon(): Promise<void> {
    this.started = false;
    if (this.elector) await this.elector.stop(false);
    this.serialize(() => this.stopControllers());
    await this.transition;
  }

  /**
   * The lease is gone: the reconciles in flight were aborted with the controllers; report the loss
   * once they have returned, or once half the gap between renew deadline and lease duration has
   * passed (a reconcile stuck in something that ignores its abort must not outlive the lease).
   */
  private async leadershipLost(report: () => void, election: NonNullable<ManagerOptions['leaderElection']>): Promise<void> {
    this.started = false;
    this.elector?.stop(false).catch(() => undefined);
    const graceMs = Math.max(1, (election.leaseDurationMs - election.renewDeadlineMs) / 2);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.transition, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.opts.logger.error({ identity: election.identity }, 'leader election lost: in-flight reconciles aborted, exiting');
    report();
  }

  /** Wait until the current start/stop transition is done (tests). */
  settled(): Promise<void> {
    return this.transition;
  }

  private serialize(step: () => Promise<void>): void {
    this.transition = this.transition.then(step).catch((err: unknown) => this.opts.logger.error({ err }, 'controller start/stop failed'));
  }

  private async startControllers(): Promise<void> {
    if (this.runners.length) return;
    const { reconcilers, logger, informers: _informers, leaderElection: _le, ...runnerOpts } = this.opts;
    const runners = reconcilers.map((r) => new ControllerRunner(this.informers, r, { ...runnerOpts, logger: logger.child({ controller: r.name }) }));
    // Every controller subscribes first, so that each kind is listed and watched once for all of them.
    for (const r of runners) r.register();
    try {
      await this.informers.start();
    } catch (err) {
      this.informers.stop();
      throw err;
    }
    this.runners = runners;
    for (const r of runners) r.start();
    this.resyncTimer = setInterval(() => void this.informers.resync(), runnerOpts.resyncPeriodMs);
    this.resyncTimer.unref();
    logger.info({ controllers: reconcilers.map((r) => r.name) }, 'controllers started');
  }

  private async stopControllers(): Promise<void> {
    const runners = this.runners;
    this.runners = [];
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await Promise.all(runners.map((r) => r.stop()));
    this.informers.stop();
    if (runners.length) this.opts.logger.info('controllers stopped');
  }
}
