import { CacheUnavailableError, type Logger } from '../../../service-kit/src/index.js';
import { requestTarget, S3Error, type ErrorMapping } from '../../../object-model/src/index.js';

/** The data plane's own errors on its internal API: the multipart cache being down is a 503 to retry. */
export function dataPlaneErrors(logger: Logger): ErrorMapping {
  return (err, req) => {
    if (!(err instanceof CacheUnavailableError)) return undefined;
    logger.warn({ err: err.message, method: req.method, url: requestTarget(req) }, 'cache unavailable');
    return new S3Error('ServiceUnavailable', 'multipart upload state is unavailable; retry later');
  };
}
