import { S3Error } from '../../../object-model/src/index.js';
import type { S3Handler } from '../s3/operation.js';
import { discard } from '../s3/request.js';

/** Features Strata leaves out by design (versioning, policies, object lock, lifecycle...). */
export function notImplemented(feature: string): S3Handler {
  return async ({ req }) => {
    discard(req);
    throw new S3Error('NotImplemented', `Strata does not implement ${feature}.`);
  };
}
