import { S3Error, type Cancellation } from '../../../object-model/src/index.js';

/** How long a call may wait for one of the gateway's connections to an internal service by default. */
export const DEFAULT_CONNECTION_WAIT_MS = 5_000;

/**
 * The calls that may hold a connection to one internal service at once (the agent's maxSockets),
 * and the queue of those waiting for one. A call takes its turn here, before its circuit breaker
 * times it, so that waiting for a connection is queueing and never counts as the upstream failing:
 * a call that waits too long is answered 503 SlowDown (which no breaker counts), one whose client
 * goes away leaves the queue.
 */
export class ConnectionQueue {
  private inUse = 0;
  private readonly waiting: Array<{ grant: () => void }> = [];

  constructor(
    private readonly size: number,
    private readonly service: string,
    private readonly maxWaitMs = DEFAULT_CONNECTION_WAIT_MS,
  ) {}

  /** Resolves with a release function (idempotent) once a connection is free for this call. */
  acquire(cancellation?: Cancellation): Promise<() => void> {
    if (this.inUse < this.size && this.waiting.length === 0) return Promise.resolve(this.take());
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(timer);
          resolve(this.take());
        },
      };
      const leave = (err: Error) => {
        const at = this.waiting.indexOf(entry);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        clearTimeout(timer);
        reject(err);
      };
      const timer = setTimeout(() => leave(new S3Error('SlowDown', `Every connection to the ${this.service} is busy; please retry later.`)), this.maxWaitMs);
      timer.unref();
      cancellation?.onCancel(() => leave(Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' })));
      this.waiting.push(entry);
    });
  }

  /** Calls holding or waiting for a connection. */
  load(): { inUse: number; waiting: number } {
    return { inUse: this.inUse, waiting: this.waiting.length };
  }

  private take(): () => void {
    this.inUse++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inUse--;
      this.waiting.shift()?.grant();
    };
  }
}
