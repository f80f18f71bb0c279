const MAX_INTERVAL_MS = 200;

/**
 * Polls `check` until it holds and answers its value: for state a test cannot await (a watch, a
 * relay, a server's recovery). It holds when it neither throws nor answers `false`, so both an
 * assertion (`() => expect(x).to.equal(1)`) and a predicate (`() => x === 1`) work. After `timeoutMs`
 * it fails naming `what`, with the last error, if any.
 */
export async function eventually<T>(check: () => T | Promise<T>, what = 'condition', timeoutMs = 30_000): Promise<Exclude<T, false>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  // Quick at first (most conditions hold within a few ms), then lighter on what it polls (a server).
  for (let intervalMs = 10; ; intervalMs = Math.min(intervalMs * 1.5, MAX_INTERVAL_MS)) {
    try {
      const value = await check();
      if (value !== false) return value as Exclude<T, false>;
      last = undefined;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const why = last === undefined ? '' : `: ${last instanceof Error ? last.message : String(last)}`;
      throw new Error(`timed out waiting for ${what}${why}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
