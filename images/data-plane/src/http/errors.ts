import { CacheUnavailableError, type Logger } from '../../../service-kit/src/index.js';
import { requestTarget, S3Error, type ErrorMapping } from '../../../object-model/src/index.js';
import { BlobMissingError } from '../backends/storage-backend.js';

/**
 * The data plane's own errors on its internal API: the multipart cache being down is a 503 to retry; a
 * blob missing where another read than GET met it (a copy's source) is the 503 that GET answers.
 */
export function dataPlaneErrors(logger: Logger): ErrorMapping {
  return (err, req) => {
    if (err instanceof BlobMissingError) {
      logger.error(
        { backend: err.backendKey, locator: err.locator, method: req.method, url: requestTarget(req) },
        'blob bytes missing on its storage backend (data loss)',
      );
      return err.toS3Error();
    }
    if (!(err instanceof CacheUnavailableError)) return undefined;
    logger.warn({ err: err.message, method: req.method, url: requestTarget(req) }, 'cache unavailable');
    return new S3Error('ServiceUnavailable', 'multipart upload state is unavailable; retry later');
  };
}
