/**
 * Registers mocha hooks that start a fixture before the calling suite (`'suite'`) or before each of
 * its tests (`'each'`) and stop it after. Answers an object that stands for the fixture running
 * now: call inside `describe`, use it inside tests.
 */
export function fixtureHooks<T extends object>(scope: 'suite' | 'each', start: () => Promise<T>, stop: (fixture: T) => Promise<void> | void): T {
  let current: T | undefined;
  const now = (): T => {
    if (!current) throw new Error('the fixture runs only while a test does');
    return current;
  };
  const [starting, stopping] = scope === 'suite' ? [before, after] : [beforeEach, afterEach];
  starting(async () => {
    current = await start();
  });
  stopping(async () => {
    if (current) await stop(current);
  });
  return new Proxy({} as T, {
    get(_, key) {
      const fixture = now();
      const value: unknown = Reflect.get(fixture, key);
      return typeof value === 'function' ? value.bind(fixture) : value;
    },
  });
}
