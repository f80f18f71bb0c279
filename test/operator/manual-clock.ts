import { eventually } from '../support/eventually.js';

/**
 * A monotonic clock that moves only when a test advances it (LeaderElectionOptions.monotonicNow):
 * lease expiry and renew deadlines are then reached by advancing it, not by waiting them out.
 */
export class ManualClock {
  private ms = 1_000_000;
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** Lets time pass on `clock`, 100 ms per poll, until `check` holds (see eventually). */
export function passTime<T>(clock: ManualClock, check: () => T, what: string): Promise<Exclude<T, false>> {
  return eventually(() => {
    clock.advance(100);
    return check();
  }, what);
}
