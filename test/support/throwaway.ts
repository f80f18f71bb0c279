// Throw-away servers that tests start (PostgreSQL replicas, Redis clusters, radosgw): cleaned up when
// the test process exits or is interrupted, started with retries, and shared within one mocha run.

const cleanups = new Set<() => void>();
let hooked = false;

function runAll(): void {
  for (const cleanup of [...cleanups]) cleanup();
}

function hookProcessExit(): void {
  if (hooked) return;
  hooked = true;
  // 'exit' handlers must be synchronous: process.kill and rmSync are.
  process.on('exit', runAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      runAll();
      // Re-raise so the default action (or the runner's own handler) still happens.
      process.kill(process.pid, signal);
    });
  }
}

/**
 * Run `cleanup` (synchronous: kill processes, remove temp dirs) when the process exits or is
 * interrupted. Returns it as a run-once function for an early stop, after which exit skips it.
 */
export function cleanUpAtExit(cleanup: () => void): () => void {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    cleanups.delete(once);
    cleanup();
  };
  cleanups.add(once);
  hookProcessExit();
  return once;
}

/** `start()`, tried again up to `attempts` times in all: a free port may be taken between choosing and binding it. */
export async function startWithRetries<T>(start: () => Promise<T>, attempts: number): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      return await start();
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

/** One instance shared by every test file of the run, started on first use; a failed start is retried by the next caller. */
export function sharedPerRun<T>(start: () => Promise<T>): () => Promise<T> {
  let shared: Promise<T> | undefined;
  return () => {
    shared ??= start().catch((err: unknown) => {
      shared = undefined;
      throw err;
    });
    return shared;
  };
}
