import type { NextFunction, Request, Response } from 'express';
import { CacheUnavailableError, S3Error, type Logger } from '../../../service-kit/src/index.js';

/** Renders errors as the internal API's `{"error":{code,message,extra?}}` with the S3 status. */
export function errorHandler(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // The client went away mid-request: nobody is left to answer.
    if ((err as { code?: string }).code === 'ECONNRESET' || req.socket?.destroyed) {
      logger.info({ method: req.method, url: req.originalUrl }, 'client aborted the request');
      res.destroy();
      return;
    }
    let s3: S3Error;
    if (err instanceof S3Error) s3 = err;
    else if (err instanceof CacheUnavailableError) {
      logger.warn({ err: err.message, method: req.method, url: req.originalUrl }, 'cache unavailable');
      s3 = new S3Error('ServiceUnavailable', 'multipart upload state is unavailable; retry later');
    } else if ((err as { type?: string }).type === 'entity.parse.failed') s3 = new S3Error('InvalidArgument', 'the request body is not valid JSON');
    else if ((err as { type?: string }).type === 'entity.too.large') s3 = new S3Error('MaxMessageLengthExceeded');
    else if ((err as { status?: number }).status === 400) s3 = new S3Error('InvalidArgument', (err as Error).message);
    else {
      logger.error({ err, method: req.method, url: req.originalUrl }, 'internal error');
      s3 = new S3Error('InternalError');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // A body we stopped reading must not be drained: answer, then close the connection.
    if (!req.complete) res.setHeader('connection', 'close');
    res.status(s3.status).json(s3.toJSON());
  };
}
