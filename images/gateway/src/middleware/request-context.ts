import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Counter } from 'prom-client';
import type { Logger } from '../../../service-kit/src/index.js';
import { state } from '../context.js';

export interface TrafficCounters {
  bytesIn: Counter<'operation'>;
  bytesOut: Counter<'operation'>;
}

/**
 * First middleware of every request: request id (x-amz-request-id on every answer), abort signal
 * tied to the client connection, byte counters and one structured log line when the answer is done.
 */
export function requestContext(logger: Logger, counters: TrafficCounters) {
  return (req: Request, res: Response, next: NextFunction) => {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    const start = process.hrtime.bigint();
    const st = state(res);
    st.requestId = requestId;
    st.operation = 'Unknown';
    st.errorFormat = 'xml';
    st.bytesIn = 0;
    st.bytesOut = 0;
    st.abort = new AbortController();
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('x-amz-id-2', requestId);
    res.setHeader('Server', 'Strata');
    // Bytes are counted on the socket (headers included) so that no listener changes the body stream.
    const socket = req.socket;
    const readAtStart = socket.bytesRead;
    const writtenAtStart = socket.bytesWritten;
    res.on('close', () => {
      if (!res.writableFinished) st.abort.abort();
      st.bytesIn = socket.bytesRead - readAtStart;
      st.bytesOut = socket.bytesWritten - writtenAtStart;
      counters.bytesIn.inc({ operation: st.operation }, st.bytesIn);
      counters.bytesOut.inc({ operation: st.operation }, st.bytesOut);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      logger.info(
        {
          reqId: requestId,
          op: st.operation,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
          in: st.bytesIn,
          out: st.bytesOut,
          user: st.caller?.username,
          ...(res.writableFinished ? {} : { aborted: true }),
        },
        'request',
      );
    });
    next();
  };
}
