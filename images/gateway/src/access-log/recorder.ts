import http from 'node:http';
import type { TLSSocket } from 'node:tls';
import { DeliveredResponse, type Next } from '../../../service-kit/src/index.js';
import type { BucketInfo } from '../../../object-model/src/index.js';
import { state, type Caller } from '../context.js';
import type { BucketAccess } from '../middleware/bucket-access.js';
import type { TrustedProxies } from '../../../service-kit/src/trusted-proxies.js';
import { sentTarget } from '../s3/virtual-host.js';
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

/** When a response's first byte went (its headers), set by its wrapped writeHead (responses of other classes than the kit's). */
const FIRST_BYTE = Symbol('strata.first-byte');
/** When the request came (epoch ms, and process.hrtime). */
const TIMES = Symbol('strata.access-log-times');
/** When the request's body ended (if it had one). */
const BODY_END = Symbol('strata.body-end');
interface RequestTimes {
  at: number;
  start: bigint;
}
type TimedResponse = http.ServerResponse & { [FIRST_BYTE]?: bigint; [TIMES]?: RequestTimes };
type TimedRequest = http.IncomingMessage & { [BODY_END]?: bigint };
/** When the answer's first byte went: the kit's responses note it themselves; others have their writeHead wrapped below. */
function firstByteOf(res: TimedResponse): bigint | undefined {
  return res instanceof DeliveredResponse ? res.headWrittenAt : res[FIRST_BYTE];
}

/** The request has a body: its end is when turn-around time starts (S3: from the request's last byte). */
const hasBody = (req: http.IncomingMessage) => req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;

/** A request's log line for `bucket`'s logging rule, handed to the delivery (none when the bucket does not log). */
function recordLine(
  req: http.IncomingMessage,
  res: TimedResponse,
  times: RequestTimes,
  end: bigint,
  bucket: BucketInfo,
  delivery: AccessLogDelivery,
  proxies: TrustedProxies,
): void {
  const rule = bucket.logging?.[0];
  if (!rule) return;
  const st = state(res);
  const firstByte = firstByteOf(res);
  const { start } = times;
  const bodyEnd = (req as TimedRequest)[BODY_END];
  const time = new Date(times.at);
  const record: AccessLogRecord = {
    bucketOwner: bucket.owner,
    bucket: bucket.name,
    time,
    remoteIp: proxies.clientAddress(req),
    requester: st.caller?.username,
    requestId: st.requestId,
    operation: logOperation(st.operation, req.method ?? 'GET', Boolean(st.key)),
    key: st.key || undefined,
    requestUri: `${req.method} ${sentTarget(req)} HTTP/${req.httpVersion}`,
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
}

/**
 * Server access logging (S3's): one log line per request to a bucket whose logging is on, handed to the
 * delivery once the answer is done — refused requests included, as S3 logs them. The bucket's record is the one
 * the request resolved (held by BucketAccess for its cache lifetime, read without waiting once it has come);
 * when it is no longer held, an authenticated request's bucket is looked up again, an anonymous one's is not (so
 * that a flood of anonymous requests to made-up names costs no lookups). Never delays or fails the request; a
 * request to a bucket that does not log costs a few timestamps and listeners (hack/bench/access-log-overhead.ts).
 */
export function accessLogRecorder(buckets: BucketAccess, delivery: AccessLogDelivery, proxies: TrustedProxies) {
  // Shared listeners (no closures per request): what they need rides on the request and response.
  function bodyEnded(this: TimedRequest) {
    this[BODY_END] = process.hrtime.bigint();
  }
  const requestDone = (res: TimedResponse) => {
    const st = state(res);
    if (!st.bucket || st.errorCode === 'NoSuchBucket' || st.errorCode === 'InvalidBucketName') return;
    const end = process.hrtime.bigint();
    const req = res.req;
    const times = res[TIMES]!;
    const known = buckets.recent(st.bucket);
    if (known?.settled) return recordLine(req, res, times, end, known.settled.value, delivery, proxies);
    void (known?.pending ?? (st.caller ? buckets.lookup(st.bucket) : undefined))?.then(
      (bucket) => recordLine(req, res, times, end, bucket, delivery, proxies),
      () => undefined,
    );
  };
  function onClose(this: TimedResponse) {
    requestDone(this);
  }
  return (req: http.IncomingMessage, res: http.ServerResponse, next: Next): void => {
    (res as TimedResponse)[TIMES] = { at: Date.now(), start: process.hrtime.bigint() };
    if (!(res instanceof DeliveredResponse)) {
      // (Express's response, on its own routes: its writeHead wrapped, at the cost of a closure.)
      const theirs = res.writeHead;
      res.writeHead = function (this: TimedResponse, ...args: Parameters<typeof res.writeHead>) {
        this[FIRST_BYTE] ??= process.hrtime.bigint();
        return theirs.apply(this, args);
      } as typeof res.writeHead;
    }
    if (hasBody(req)) req.on('end', bodyEnded);
    res.on('close', onClose);
    next();
  };
}
