import type http from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Next } from '../../../service-kit/src/index.js';
import type { BucketInfo } from '../../../object-model/src/index.js';
import { state, type Caller } from '../context.js';
import type { BucketAccess } from '../middleware/bucket-access.js';
import type { TrustedProxies } from '../proxy.js';
import type { AccessLogDelivery } from './delivery.js';
import { accessLogLine, type AccessLogRecord } from './log-line.js';
import { logOperation } from './log-operation.js';

/** Operations whose answer is (part of) an object, and those that upload one: their log line carries its size. */
const READS = new Set(['GetObject', 'HeadObject']);
const UPLOADS = new Set(['PutObject', 'UploadPart', 'PostObject']);

const SIGNATURES: Record<Caller['via'], Pick<AccessLogRecord, 'signatureVersion' | 'authType'>> = {
  sigv4: { signatureVersion: 'SigV4', authType: 'AuthHeader' },
  presigned: { signatureVersion: 'SigV4', authType: 'QueryString' },
  'post-policy': { signatureVersion: 'SigV4' },
  sigv2: { signatureVersion: 'SigV2', authType: 'AuthHeader' },
  'presigned-v2': { signatureVersion: 'SigV2', authType: 'QueryString' },
  bearer: {},
};

const ms = (from: bigint, to: bigint) => Number(to - from) / 1e6;
const headerNumber = (v: string | number | string[] | undefined) => (v === undefined || Array.isArray(v) || v === '' ? undefined : Number(v));

/** The size of the object a request read or wrote, as its headers tell it. */
function objectSizeOf(req: http.IncomingMessage, res: http.ServerResponse, operation: string): number | undefined {
  if (res.statusCode >= 300) return undefined;
  if (READS.has(operation)) {
    const range = /\/(\d+)$/.exec(String(res.getHeader('content-range') ?? ''));
    return range ? Number(range[1]) : headerNumber(res.getHeader('content-length'));
  }
  if (UPLOADS.has(operation)) return headerNumber(req.headers['x-amz-decoded-content-length'] ?? req.headers['content-length']);
  return undefined;
}

/**
 * Server access logging (S3's): one log line per request to a bucket whose logging is on, handed to the
 * delivery once the answer is done — refused requests included, as S3 logs them. The bucket's record is the one
 * the request resolved (held by BucketAccess for its cache lifetime); when it is no longer held, an
 * authenticated request's bucket is looked up again, an anonymous one's is not (so that a flood of anonymous
 * requests to made-up names costs no lookups). Never delays or fails the request.
 */
export function accessLogRecorder(buckets: BucketAccess, delivery: AccessLogDelivery, proxies: TrustedProxies) {
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    const time = new Date();
    const start = process.hrtime.bigint();
    let firstByte: bigint | undefined;
    let bodyEnd: bigint | undefined;
    const writeHead = res.writeHead;
    res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
      firstByte ??= process.hrtime.bigint();
      return writeHead.apply(this, args);
    } as typeof writeHead;
    req.once('end', () => (bodyEnd = process.hrtime.bigint()));
    res.once('close', () => {
      const end = process.hrtime.bigint();
      const st = state(res);
      if (!st.bucket || st.errorCode === 'NoSuchBucket' || st.errorCode === 'InvalidBucketName') return;
      const known = buckets.recent(st.bucket) ?? (st.caller ? buckets.lookup(st.bucket) : undefined);
      void known?.then(
        (bucket: BucketInfo) => {
          const rule = bucket.logging?.[0];
          if (!rule) return;
          const record: AccessLogRecord = {
            bucketOwner: bucket.owner,
            bucket: bucket.name,
            time,
            remoteIp: proxies.clientAddress(req),
            requester: st.caller?.username,
            requestId: st.requestId,
            operation: logOperation(st.operation, req.method ?? 'GET', Boolean(st.key)),
            key: st.key || undefined,
            requestUri: `${req.method} ${req.url} HTTP/${req.httpVersion}`,
            httpStatus: res.statusCode,
            errorCode: st.errorCode,
            bytesSent: req.method === 'HEAD' ? 0 : res.writableFinished ? headerNumber(res.getHeader('content-length')) : st.bytesOut,
            objectSize: objectSizeOf(req, res, st.operation),
            totalTimeMs: ms(start, end),
            turnAroundTimeMs: firstByte === undefined ? undefined : ms(bodyEnd !== undefined && bodyEnd < firstByte ? bodyEnd : start, firstByte),
            referer: req.headers.referer,
            userAgent: req.headers['user-agent'],
            ...(st.caller ? SIGNATURES[st.caller.via] : {}),
            hostHeader: req.headers.host,
            tlsVersion: (req.socket as Partial<TLSSocket>).encrypted ? ((req.socket as TLSSocket).getProtocol() ?? undefined) : undefined,
          };
          delivery.record(bucket, rule, accessLogLine(record), time);
        },
        () => undefined,
      );
    });
    next();
  };
}
