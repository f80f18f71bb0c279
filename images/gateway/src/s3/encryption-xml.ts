import { S3Error, type EncryptionRule } from '../../../object-model/src/index.js';
import { dualLayerNotImplemented } from './encryption.js';
import { malformedXml, xmlGroup, xmlText } from './xml.js';

/**
 * S3's `ServerSideEncryptionConfiguration` ⇄ a bucket's default encryption. As S3: one Rule with an
 * ApplyServerSideEncryptionByDefault of SSEAlgorithm AES256 or aws:kms (KMSMasterKeyID only with
 * aws:kms), BucketKeyEnabled optional (kept and answered; Strata has no per-bucket keys to cache).
 */
export function parseEncryptionConfiguration(doc: Record<string, unknown>): EncryptionRule[] {
  const rules = (doc.Rule ?? []) as unknown[];
  if (rules.length !== 1) throw malformedXml('a ServerSideEncryptionConfiguration holds exactly one Rule.');
  const rule = xmlGroup(rules[0], 'Rule')!;
  const apply = xmlGroup(rule.ApplyServerSideEncryptionByDefault, 'ApplyServerSideEncryptionByDefault');
  if (!apply) throw malformedXml('the Rule holds an ApplyServerSideEncryptionByDefault.');
  const algorithm = xmlText(apply.SSEAlgorithm, 'SSEAlgorithm');
  // S3's third algorithm, dual-layer, is one Strata does not offer (as on a PUT: encryption.ts).
  if (algorithm === 'aws:kms:dsse') throw dualLayerNotImplemented();
  if (algorithm !== 'AES256' && algorithm !== 'aws:kms') throw malformedXml('SSEAlgorithm is AES256, aws:kms or aws:kms:dsse.');
  const kmsKeyId = xmlText(apply.KMSMasterKeyID, 'KMSMasterKeyID');
  if (kmsKeyId !== undefined && algorithm !== 'aws:kms')
    throw new S3Error('InvalidArgument', 'a KMSMasterKeyID is allowed only if SSEAlgorithm is aws:kms.', {
      ArgumentName: 'ApplyServerSideEncryptionByDefault',
    });
  const bucketKey = xmlText(rule.BucketKeyEnabled, 'BucketKeyEnabled');
  if (bucketKey !== undefined && bucketKey !== 'true' && bucketKey !== 'false') throw malformedXml('BucketKeyEnabled is true or false.');
  return [{ algorithm, ...(kmsKeyId ? { kmsKeyId } : {}), ...(bucketKey !== undefined ? { bucketKeyEnabled: bucketKey === 'true' } : {}) }];
}

/** The ServerSideEncryptionConfiguration document's body for a bucket's default encryption. */
export function renderEncryptionConfiguration(rules: readonly EncryptionRule[]): Record<string, unknown> {
  return {
    Rule: rules.map((r) => ({
      ApplyServerSideEncryptionByDefault: { SSEAlgorithm: r.algorithm, ...(r.kmsKeyId ? { KMSMasterKeyID: r.kmsKeyId } : {}) },
      BucketKeyEnabled: r.bucketKeyEnabled ?? false,
    })),
  };
}
