import type { Counter, Logger } from '../../../service-kit/src/index.js';
import { cacheKeys, type Cache } from '../cache/cache.js';
import type { MetadataStore } from '../metadata/store.js';
import type { EventBroker, StrataEvent, Subscription } from './broker.js';

export const CONTROL_PLANE_QUEUE = 'strata.control-plane';

/**
 * Applies the side effects of object-store events: per-bucket object and byte counts (in the same
 * transaction that records the event id, so a redelivered event changes nothing) and cache
 * invalidation (idempotent by nature).
 */
export function startEventConsumer(deps: {
  broker: EventBroker;
  store: MetadataStore;
  cache: Cache;
  logger: Logger;
  consumed: Counter<'type' | 'outcome'>;
}): Promise<Subscription> {
  return deps.broker.subscribe(CONTROL_PLANE_QUEUE, async (event: StrataEvent) => {
    try {
      const applied = await deps.store.applyEventOnce(event);
      const bucket = event.payload.bucket;
      if (typeof bucket === 'string' && event.type.startsWith('bucket.')) await deps.cache.del(cacheKeys.bucket(bucket));
      deps.consumed.inc({ type: event.type, outcome: applied ? 'applied' : 'duplicate' });
    } catch (err) {
      deps.consumed.inc({ type: event.type, outcome: 'failed' });
      deps.logger.warn({ err, eventId: event.id, type: event.type }, 'event not applied, will be redelivered');
      throw err;
    }
  });
}
