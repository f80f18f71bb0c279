import type { OperatorSettings } from '../support/settings.js';

/** What the rule needs of a Bucket: its backend kind (absent: fs, the CRD's default). */
interface BucketLike {
  spec?: { backend?: { kind?: string } };
}

/** Whether the Bucket keeps its bytes on the data plane's volume (the fs backend). */
export const onDataVolume = (bucket: BucketLike): boolean => (bucket.spec?.backend?.kind ?? 'fs') === 'fs';

/**
 * The data plane replicas a namespace's stack runs. The data volume is ReadWriteOnce: pods on two
 * nodes cannot both mount it, and the fs backend's sweeps assume one writer. So a stack with an fs
 * Bucket keeps one data plane on the volume whatever STRATA_DATA_PLANE_REPLICAS says; without one, the
 * data plane is stateless (object-store and cloud backends, multipart state in Redis, the outbox relay
 * at-least-once to idempotent consumers) and runs the configured count, without the volume.
 */
export function dataPlaneReplicasFor(settings: OperatorSettings, buckets: readonly BucketLike[]): number {
  return buckets.some(onDataVolume) ? 1 : settings.dataPlaneReplicas;
}

/** The settings a namespace's stack is rendered with: the data plane count its Buckets allow. */
export function stackSettingsFor(settings: OperatorSettings, buckets: readonly BucketLike[]): OperatorSettings {
  const dataPlaneReplicas = dataPlaneReplicasFor(settings, buckets);
  return dataPlaneReplicas === settings.dataPlaneReplicas ? settings : { ...settings, dataPlaneReplicas };
}

/** Why an fs Bucket holds its stack's data plane at one replica (undefined: it does not). */
export function dataPlaneHeldNote(settings: OperatorSettings, bucket: BucketLike): string | undefined {
  if (!onDataVolume(bucket) || settings.dataPlaneReplicas <= 1) return undefined;
  return (
    `the data plane runs 1 replica, not the ${settings.dataPlaneReplicas} STRATA_DATA_PLANE_REPLICAS asks for: ` +
    `fs Buckets keep their bytes on one ReadWriteOnce volume (use a minio or cloud backend to run more)`
  );
}
