import { Worker } from 'node:worker_threads';

/**
 * A small pool of worker threads for the AES-GCM work of large transfers (decrypt-thread.ts,
 * encrypt-thread.ts), fair per tenant and per stream.
 *
 * Jobs (about 1 MiB each) wait in one queue per stream, streams in one ring per tenant, tenants in one
 * ring: the next job sent to a thread is the next tenant's next stream's oldest job, so a tenant with
 * many streams gets no more of the threads than one with a single stream, and a stream's jobs keep
 * their order. A thread takes at most PER_THREAD jobs at a time, so the order is decided here, when a
 * thread is free, not by the threads' own message queues.
 *
 * A thread that fails (an error it did not catch, an exit) fails only the job that failed it, and so only
 * that job's stream. Jobs are pure (their input stays unchanged until answered), so when the thread held
 * several, each is run again alone on a thread of its own: the one that fails again is the one at fault.
 * A failed thread is replaced at the next job; the jobs still queued go to the threads left.
 */

/** Jobs a thread holds at once: one being run and one waiting, so that it never idles between two. */
const PER_THREAD = 2;

/** What a thread answers for one job: `id`, with anything else the job's handler sends. */
export type PoolAnswer = { id: number } & Record<string, unknown>;

interface Job {
  readonly message: Record<string, unknown>;
  readonly transfer: ArrayBuffer[];
  readonly resolve: (answer: PoolAnswer) => void;
  readonly reject: (err: Error) => void;
  /** It was held by a thread that failed with other jobs: it runs again, alone on its thread. */
  suspect?: boolean;
  stream: StreamQueue;
}

interface StreamQueue {
  readonly tenant: TenantQueue;
  readonly jobs: Job[];
  /** In its tenant's ring (it has jobs queued). */
  active: boolean;
  closed: boolean;
}

interface TenantQueue {
  readonly name: string;
  /** Streams with jobs queued, the next to be served first. */
  readonly ring: StreamQueue[];
  active: boolean;
  /** Streams open for this tenant (the entry goes with the last). */
  open: number;
}

interface Thread {
  readonly worker: Worker;
  readonly taken: Map<number, Job>;
  dead: boolean;
  /** Holds a suspect job: no other is given to it meanwhile. */
  isolating: boolean;
}

/** A stream's place in the pool: its jobs are queued under it, fairly among its tenant's streams. */
export interface PoolStream {
  /** Run `message` on a thread (after this stream's earlier jobs were sent); resolves with the thread's answer. */
  run(message: Record<string, unknown>, transfer?: ArrayBuffer[]): Promise<PoolAnswer>;
  /** The stream is done (or failed): its queued jobs are dropped (their promises reject). */
  close(): void;
}

export class CryptoPool {
  private readonly threads: Thread[] = [];
  private readonly tenants = new Map<string, TenantQueue>();
  /** Tenants with jobs queued, the next to be served first. */
  private readonly ring: TenantQueue[] = [];
  private nextId = 1;
  private closing = false;

  /**
   * `source`: the threads' code (CommonJS, run with `eval`): it answers every message `{ id, ... }` it is
   * sent with one message carrying the same `id`.
   */
  constructor(
    private readonly source: string,
    private readonly size = 2,
    private readonly name = 'crypto',
  ) {}

  /** A new stream of `tenant` (e.g. the owner of the object it reads or writes). */
  stream(tenant: string): PoolStream {
    let t = this.tenants.get(tenant);
    if (!t) this.tenants.set(tenant, (t = { name: tenant, ring: [], active: false, open: 0 }));
    t.open++;
    const s: StreamQueue = { tenant: t, jobs: [], active: false, closed: false };
    return {
      run: (message, transfer = []) =>
        new Promise<PoolAnswer>((resolve, reject) => {
          if (s.closed || this.closing) {
            reject(new Error(s.closed ? 'the stream is closed' : `the ${this.name} threads are stopped`));
            return;
          }
          s.jobs.push({ message, transfer, resolve, reject, stream: s });
          this.activate(s);
          this.dispatch();
        }),
      close: () => {
        if (s.closed) return;
        s.closed = true;
        const dropped = s.jobs.splice(0);
        this.deactivate(s);
        for (const job of dropped) job.reject(new Error('the stream is closed'));
        if (--t.open === 0 && !t.active) this.tenants.delete(t.name);
      },
    };
  }

  /** Threads running now (for tests and metrics). */
  get threadCount(): number {
    return this.threads.filter((t) => !t.dead).length;
  }

  private activate(s: StreamQueue): void {
    if (s.active || s.jobs.length === 0) return;
    s.active = true;
    s.tenant.ring.push(s);
    if (!s.tenant.active) {
      s.tenant.active = true;
      this.ring.push(s.tenant);
    }
  }

  /** Take a stream with no jobs left out of its tenant's ring, and the tenant out of the pool's when it has none. */
  private deactivate(s: StreamQueue): void {
    if (!s.active) return;
    s.active = false;
    const t = s.tenant;
    t.ring.splice(t.ring.indexOf(s), 1);
    if (t.ring.length === 0 && t.active) {
      t.active = false;
      this.ring.splice(this.ring.indexOf(t), 1);
      if (t.open === 0) this.tenants.delete(t.name);
    }
  }

  /** The next job in fair order (every stream in a ring has jobs): next tenant, its next stream, its oldest job. */
  private peek(): Job | undefined {
    return this.ring[0]?.ring[0]?.jobs[0];
  }

  /** Take the job peek() gave, and move its stream and tenant to the back of their rings. */
  private take(): Job {
    const tenant = this.ring.shift()!;
    const stream = tenant.ring.shift()!;
    const job = stream.jobs.shift()!;
    if (stream.jobs.length > 0) tenant.ring.push(stream);
    else stream.active = false;
    if (tenant.ring.length > 0) this.ring.push(tenant);
    else {
      tenant.active = false;
      if (tenant.open === 0) this.tenants.delete(tenant.name);
    }
    return job;
  }

  /** Hand queued jobs to threads with room, least loaded first, starting threads up to `size`. */
  private dispatch(): void {
    while (!this.closing) {
      const next = this.peek();
      if (!next) return;
      const thread = this.freeThread(next.suspect === true);
      if (!thread) return;
      const job = this.take();
      const id = this.nextId++;
      if (thread.taken.size === 0) thread.worker.ref();
      thread.taken.set(id, job);
      thread.isolating = job.suspect === true;
      try {
        thread.worker.postMessage({ ...job.message, id }, job.transfer);
      } catch (err) {
        thread.taken.delete(id);
        job.reject(err as Error);
      }
    }
  }

  /** A thread with room (`alone`: an idle one), least loaded first; a new one while fewer than `size` run and all are busy. */
  private freeThread(alone: boolean): Thread | undefined {
    const live = this.threads.filter((t) => !t.dead && !t.isolating);
    let best: Thread | undefined;
    for (const t of live) if (t.taken.size < (alone ? 1 : PER_THREAD) && (!best || t.taken.size < best.taken.size)) best = t;
    if ((!best || best.taken.size > 0) && this.threads.filter((t) => !t.dead).length < this.size) return this.start();
    return best;
  }

  /** A failed thread's jobs: a job it held alone fails; several run again, each alone (see the class comment). */
  private failed(taken: Job[], err: Error): void {
    if (taken.length === 1 || this.closing) {
      for (const job of taken) job.reject(err);
      return;
    }
    // (Last first: each goes back to the head of its stream's queue, so a stream's jobs keep their order.)
    for (const job of taken.reverse()) this.requeue(job);
  }

  private requeue(job: Job): void {
    if (job.stream.closed) {
      job.reject(new Error('the stream is closed'));
      return;
    }
    job.suspect = true;
    job.stream.jobs.unshift(job);
    this.activate(job.stream);
  }

  private start(): Thread {
    const worker = new Worker(this.source, { eval: true, name: this.name });
    // Idle, a thread does not keep the process alive (ref'd while it holds jobs).
    worker.unref();
    const thread: Thread = { worker, taken: new Map(), dead: false, isolating: false };
    worker.on('message', (m: PoolAnswer) => {
      const job = thread.taken.get(m.id);
      if (!job) return;
      thread.taken.delete(m.id);
      if (thread.taken.size === 0) {
        worker.unref();
        thread.isolating = false;
      }
      job.resolve(m);
      this.dispatch();
    });
    const fail = (err: Error) => {
      if (thread.dead) return;
      thread.dead = true;
      const index = this.threads.indexOf(thread);
      if (index >= 0) this.threads.splice(index, 1);
      const taken = [...thread.taken.values()];
      thread.taken.clear();
      this.failed(taken, err);
      void worker.terminate();
      // Jobs still queued go to the threads left (or a new one).
      this.dispatch();
    };
    worker.on('error', (err) => fail(err));
    worker.on('exit', (code) => fail(new Error(`a ${this.name} thread exited (${code})`)));
    this.threads.push(thread);
    return thread;
  }

  /** Stop every thread, for good: every job fails, those on threads and those still queued (none is left unsettled). */
  async close(): Promise<void> {
    this.closing = true;
    const stopped = new Error(`the ${this.name} threads are stopped`);
    for (const tenant of this.ring.splice(0)) {
      for (const stream of tenant.ring.splice(0)) {
        stream.active = false;
        for (const job of stream.jobs.splice(0)) job.reject(stopped);
      }
      tenant.active = false;
    }
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
