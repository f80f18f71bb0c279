import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { registeredCounter, sendJson, type Logger, type Registry } from '../../../service-kit/src/index.js';
import { S3Error } from '../../../object-model/src/index.js';
import { rawTarget, state } from '../context.js';
import { errorXml } from '../s3/xml.js';

/** Anything thrown becomes an S3Error; unknown failures are logged and answered as InternalError. */
export function toS3Error(err: unknown, logger: Logger): S3Error {
  if (err instanceof S3Error) return err;
  const e = err as { type?: string; status?: number; name?: string; message?: string };
  if (e?.type === 'entity.parse.failed') return new S3Error('InvalidArgument', 'The request body is not valid JSON.');
  if (e?.type === 'entity.too.large') return new S3Error('MaxMessageLengthExceeded');
  logger.error({ err }, 'unexpected error');
  return new S3Error('InternalError');
}

/**
 * Renders errors as S3 XML (or JSON for the JSON routes) with the request id; HEAD gets no body.
 * An error of a request whose client has gone (a reset, a closed connection: the read or write that
 * failed, or an upstream call cancelled for it) is no fault of the service and nobody is left to
 * answer: it is counted (strata_gateway_client_disconnects_total, with `registry`) and logged at
 * debug level only, so that a tenant cannot flood the log or raise alerts by hanging up.
 */
export function errorRenderer(logger: Logger, registry?: Registry) {
  const disconnects =
    registry &&
    registeredCounter(registry, 'strata_gateway_client_disconnects_total', 'Requests whose client went away before the answer was complete, by S3 operation', [
      'operation',
    ]);
  return (err: unknown, req: http.IncomingMessage, res: http.ServerResponse, _next: Next) => {
    const st = state(res);
    if (st.clientGone?.fired || req.socket?.destroyed) {
      disconnects?.inc({ operation: st.operation ?? 'Unknown' });
      const e = err as { code?: string; message?: string } | undefined;
      logger.debug({ reqId: st.requestId, op: st.operation, code: e?.code, msg: e?.message }, 'client went away');
      res.destroy();
      return;
    }
    // Already answered (a body that timed out is answered as it times out): nothing left to say.
    if (res.writableEnded) return;
    const s3 = toS3Error(err, logger);
    st.errorCode = s3.code;
    if (res.headersSent) {
      // Bytes already went out: the only honest signal left is to cut the connection.
      logger.warn({ reqId: st.requestId, code: s3.code, msg: s3.message }, 'error after response started');
      res.destroy();
      return;
    }
    res.statusCode = s3.status;
    if (s3.code === 'NotImplemented' || s3.code === 'MethodNotAllowed') res.setHeader('Allow', 'GET, PUT, POST, DELETE, HEAD');
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (st.errorFormat === 'json') {
      sendJson(res, s3.toJSON());
      return;
    }
    const body = errorXml(s3, rawTarget(req).path, st.requestId);
    res.setHeader('Content-Type', 'application/xml');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
  };
}
