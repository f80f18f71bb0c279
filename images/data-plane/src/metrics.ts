import { Counter, Gauge, type Registry } from '../../service-kit/src/index.js';

export interface DataPlaneMetrics {
  bytesIn: Counter;
  bytesOut: Counter;
  instantUploads: Counter<'outcome'>;
  missingBlobReads: Counter;
  multipartInFlight: Gauge;
  outboxBacklog: Gauge;
}

export function dataPlaneMetrics(registry: Registry): DataPlaneMetrics {
  return {
    bytesIn: new Counter({ name: 'strata_data_bytes_in_total', help: 'Object bytes received and stored (bodies and parts)', registers: [registry] }),
    bytesOut: new Counter({ name: 'strata_data_bytes_out_total', help: 'Object bytes sent to readers', registers: [registry] }),
    instantUploads: new Counter({
      name: 'strata_instant_uploads_total',
      help: 'Instant-upload attempts by outcome (hit: committed without reading the body; miss: body stored)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    missingBlobReads: new Counter({
      name: 'strata_missing_blob_reads_total',
      help: 'Reads of objects whose bytes are missing on their storage backend (data loss; each is logged at error with its bucket and key)',
      registers: [registry],
    }),
    multipartInFlight: new Gauge({
      name: 'strata_multipart_uploads_in_flight',
      help: 'Multipart uploads initiated by this process and not yet completed or aborted',
      registers: [registry],
    }),
    outboxBacklog: new Gauge({
      name: 'strata_outbox_backlog',
      help: 'Outbox events not yet confirmed by the broker (the shared outbox as this replica last counted it: every replica reports the same figure, so take the max, not the sum)',
      registers: [registry],
    }),
  };
}
