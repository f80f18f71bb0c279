import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The abort signal of the reconcile in progress, as controller-runtime's context: the manager aborts
 * it when leadership is lost, when it stops, or when the reconcile's deadline passes. It is carried
 * through the reconcile's async calls (AsyncLocalStorage) so that every API and HTTP request made on
 * its behalf is cut off with it, including those of helpers and reconcilers that never see it.
 */
const current = new AsyncLocalStorage<AbortSignal>();

/** Run `work` as a reconcile that `signal` aborts. */
export function runWithReconcileSignal<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  return current.run(signal, work);
}

/** The running reconcile's signal (undefined outside a reconcile). */
export function reconcileSignal(): AbortSignal | undefined {
  return current.getStore();
}

/** A signal for one request: aborted after `timeoutMs` or with the running reconcile, whichever comes first. */
export function requestSignal(timeoutMs: number): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  const reconcile = current.getStore();
  return reconcile ? AbortSignal.any([timeout, reconcile]) : timeout;
}
