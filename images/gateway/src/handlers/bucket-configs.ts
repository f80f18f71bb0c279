import { S3Error, type BucketConfigs, type S3ErrorCode } from '../../../object-model/src/index.js';
import { callerOf } from '../context.js';
import { parseCorsConfiguration, renderCorsConfiguration, type CorsConfigurationXml } from '../s3/cors-xml.js';
import { parseEncryptionConfiguration, renderEncryptionConfiguration } from '../s3/encryption-xml.js';
import { parseTagging, renderTagging, type TaggingXml } from '../s3/tagging-xml.js';
import { parseLifecycleConfiguration, renderLifecycleConfiguration, type LifecycleConfigurationXml } from '../s3/lifecycle-xml.js';
import type { S3Handler } from '../s3/operation.js';
import { discard, readCheckedDocument } from '../s3/request.js';
import { sendXml, sendStatus } from '../s3/render.js';
import { parseXml } from '../s3/xml.js';

/** How one bucket configuration is written in S3's XML. */
interface ConfigDocument<K extends keyof BucketConfigs> {
  root: string;
  parse(doc: Record<string, unknown>): BucketConfigs[K];
  render(rules: BucketConfigs[K]): Record<string, unknown>;
}

/**
 * Put/Get/Delete of a bucket configuration kept with the bucket record. As S3: the document must
 * come with Content-MD5 or a flexible checksum; Get of none is NoSuchLifecycleConfiguration /
 * NoSuchCORSConfiguration / NoSuchTagSet (the control plane's answer); Delete is 204 whether or not there was one.
 * After a change this gateway forgets its copy of the bucket record, so the answers it derives from
 * the configuration (x-amz-expiration, CORS) follow at once; other replicas within their 2 s cache.
 */
function configHandlers<K extends keyof BucketConfigs>(kind: K, document: ConfigDocument<K>): { put: S3Handler; get: S3Handler; delete: S3Handler } {
  return {
    put: async ({ req, res, bucket, deps }) => {
      const body = await readCheckedDocument(req, res, { required: true });
      const record = await deps.buckets.owned(bucket, callerOf(res));
      const rules = document.parse(parseXml<Record<string, unknown>>(body.toString('utf8'), document.root));
      // (Only a TagSet may be empty: no tags, as after DeleteBucketTagging.)
      await deps.objects.putBucketConfig(bucket, kind, rules.length > 0 ? rules : undefined, record);
      deps.buckets.forget(bucket);
      sendStatus(res, 200);
    },
    get: async ({ res, bucket, deps }) => {
      const record = await deps.buckets.owned(bucket, callerOf(res));
      sendXml(res, document.root, document.render(await deps.objects.getBucketConfig(bucket, kind, record)));
    },
    delete: async ({ req, res, bucket, deps }) => {
      discard(req);
      const record = await deps.buckets.owned(bucket, callerOf(res));
      await deps.objects.putBucketConfig(bucket, kind, undefined, record);
      deps.buckets.forget(bucket);
      sendStatus(res, 204);
    },
  };
}

/** Put/Get/DeleteBucketLifecycle(Configuration): rules applied by the daily job (03:00, with the purge). */
export const lifecycle = configHandlers('lifecycle', {
  root: 'LifecycleConfiguration',
  parse: (doc) => parseLifecycleConfiguration(doc as LifecycleConfigurationXml),
  render: renderLifecycleConfiguration,
});

/** Put/Get/DeleteBucketCors: the bucket's own CORS rules (middleware/cors.ts answers browsers by them). */
export const cors = configHandlers('cors', {
  root: 'CORSConfiguration',
  parse: (doc) => parseCorsConfiguration(doc as CorsConfigurationXml),
  render: renderCorsConfiguration,
});

/** Put/Get/DeleteBucketTagging: the bucket's own tags (an object's are handlers/object-tagging.ts). */
export const tags = configHandlers('tags', {
  root: 'Tagging',
  parse: (doc) => parseTagging(doc as TaggingXml, 'bucket'),
  render: renderTagging,
});

/** Put/Get/DeleteBucketEncryption: the bucket's default encryption (new objects without encryption headers get it). */
export const encryption = configHandlers('encryption', {
  root: 'ServerSideEncryptionConfiguration',
  parse: (doc) => parseEncryptionConfiguration(doc),
  render: renderEncryptionConfiguration,
});

/**
 * Reads of the bucket configurations Strata has no place for (no bucket ever has one): S3's answer for a
 * bucket where it is not set, so that tools which read all of them (Terraform, `s3cmd info`, inventories)
 * see an unconfigured bucket rather than an error. Writes of them stay NotImplemented (router.ts).
 */
const UNSET_CONFIG_ANSWERS: Record<string, { operation: string } & ({ error: S3ErrorCode } | { root: string; body: Record<string, unknown> })> = {
  policy: { operation: 'GetBucketPolicy', error: 'NoSuchBucketPolicy' },
  policyStatus: { operation: 'GetBucketPolicyStatus', error: 'NoSuchBucketPolicy' },
  website: { operation: 'GetBucketWebsite', error: 'NoSuchWebsiteConfiguration' },
  replication: { operation: 'GetBucketReplication', error: 'ReplicationConfigurationNotFoundError' },
  'object-lock': { operation: 'GetObjectLockConfiguration', error: 'ObjectLockConfigurationNotFoundError' },
  requestPayment: { operation: 'GetBucketRequestPayment', root: 'RequestPaymentConfiguration', body: { Payer: 'BucketOwner' } },
  accelerate: { operation: 'GetBucketAccelerateConfiguration', root: 'AccelerateConfiguration', body: {} },
  notification: { operation: 'GetBucketNotificationConfiguration', root: 'NotificationConfiguration', body: {} },
};

/** The subresources whose GET is answered as unset (see UNSET_CONFIG_ANSWERS). */
export const UNSET_CONFIGS = Object.keys(UNSET_CONFIG_ANSWERS);

/** S3's name of the GET of configuration `name`. */
export function unsetConfigOperation(name: string): string {
  return UNSET_CONFIG_ANSWERS[name]!.operation;
}

/** GET of an unset configuration `name` (one of UNSET_CONFIGS), for the bucket's owner only. */
export function getUnsetConfig(name: string): S3Handler {
  const answer = UNSET_CONFIG_ANSWERS[name]!;
  return async ({ res, bucket, deps }) => {
    await deps.buckets.owned(bucket, callerOf(res));
    if ('error' in answer) throw new S3Error(answer.error, undefined, { BucketName: bucket });
    sendXml(res, answer.root, answer.body);
  };
}

/**
 * DELETE of the configurations that S3 can delete and no bucket has here: 204, S3's answer whether or not
 * one was set (so `terraform destroy` and cleanup scripts succeed). The others (request payment,
 * accelerate, notification, object lock, policy status) have no DELETE in S3 and stay NotImplemented.
 */
const UNSET_CONFIG_DELETES: Record<string, string> = {
  policy: 'DeleteBucketPolicy',
  website: 'DeleteBucketWebsite',
  replication: 'DeleteBucketReplication',
};

/** The subresources whose DELETE is answered as of an unset configuration (see UNSET_CONFIG_DELETES). */
export const UNSET_DELETABLE_CONFIGS = Object.keys(UNSET_CONFIG_DELETES);

/** S3's name of the DELETE of configuration `name`. */
export function unsetConfigDeleteOperation(name: string): string {
  return UNSET_CONFIG_DELETES[name]!;
}

/** DELETE of an unset configuration: nothing to remove; for the bucket's owner only. */
export const deleteUnsetConfig: S3Handler = async ({ req, res, bucket, deps }) => {
  discard(req);
  await deps.buckets.owned(bucket, callerOf(res));
  sendStatus(res, 204);
};
