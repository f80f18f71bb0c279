import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../../service-kit/src/index.js';

/**
 * The control plane commits events to the outbox too (recycle, restore, purge, buckets) but runs no
 * relay: the data plane's relay publishes them. Without a nudge they would wait for its periodic retry
 * (STRATA_OUTBOX_RETRY_MS), so after writes the control plane asks the data plane for a relay pass
 * (`POST /internal/outbox/kick`). Kicks within a few milliseconds share one request; one is cleared
 * as it is sent, so a commit made while it travels gets a kick of its own. Failures only delay
 * events until that retry, which stays the safety net.
 */
export function dataPlaneOutboxKick(dataPlaneUrl: () => string | undefined, internalToken: string, logger: Logger, delayMs = 5): () => void {
  let scheduled = false;
  const send = () => {
    scheduled = false;
    const base = dataPlaneUrl();
    if (!base) return;
    fetch(`${base}/internal/outbox/kick`, { method: 'POST', headers: { 'x-strata-internal-token': internalToken }, signal: AbortSignal.timeout(5000) })
      .then((res) => res.body?.cancel())
      .catch((err: unknown) => logger.debug({ err }, 'outbox kick not delivered; the relay retry will publish'));
  };
  return () => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(send, delayMs).unref();
  };
}

/** Kick after every successful write request (the handlers that commit events are all writes). */
export function kickOutboxAfterWrites(kick: () => void) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.on('finish', () => {
        if (res.statusCode < 400) kick();
      });
    }
    next();
  };
}
