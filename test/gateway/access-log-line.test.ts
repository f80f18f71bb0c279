import { expect } from 'chai';
import { logObjectKey } from '../../images/gateway/src/access-log/delivery.js';
import { accessLogLine, type AccessLogRecord } from '../../images/gateway/src/access-log/log-line.js';
import { logOperation } from '../../images/gateway/src/access-log/log-operation.js';

const record: AccessLogRecord = {
  bucketOwner: 'alice',
  bucket: 'photos',
  time: new Date('2026-02-06T00:00:38.123Z'),
  remoteIp: '192.0.2.3',
  requester: 'alice',
  requestId: '3E57427F3EXAMPLE',
  operation: 'REST.GET.OBJECT',
  key: 'dir/a b+c.jpg',
  requestUri: 'GET /photos/dir/a%20b%2Bc.jpg HTTP/1.1',
  httpStatus: 206,
  bytesSent: 100,
  objectSize: 4096,
  totalTimeMs: 7.4,
  turnAroundTimeMs: 2.6,
  userAgent: 'aws-cli/2 "x" \\ y',
  signatureVersion: 'SigV4',
  authType: 'AuthHeader',
  hostHeader: 'photos.s3.example.com',
};

/** The line's fields as s3-tests splits them: brackets read as quotes, then shell words. */
const fields = (line: string) =>
  [...line.matchAll(/"((?:[^"\\]|\\.)*)"|\[([^\]]*)\]|(\S+)/g)].map((m) => (m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3])!));

describe('gateway: the S3 server access-log line', () => {
  it("has S3's 26 fields in order, `-` for what a request has not, time in brackets, URI, referer and user agent quoted and escaped", () => {
    const line = accessLogLine(record);
    expect(line).to.not.contain('\n');
    expect(fields(line)).to.deep.equal([
      'alice',
      'photos',
      '06/Feb/2026:00:00:38 +0000',
      '192.0.2.3',
      'alice',
      '3E57427F3EXAMPLE',
      'REST.GET.OBJECT',
      'dir/a%20b%2Bc.jpg',
      'GET /photos/dir/a%20b%2Bc.jpg HTTP/1.1',
      '206',
      '-',
      '100',
      '4096',
      '7',
      '3',
      '-',
      'aws-cli/2 "x" \\ y',
      '-',
      '3E57427F3EXAMPLE',
      'SigV4',
      '-',
      'AuthHeader',
      'photos.s3.example.com',
      '-',
      '-',
      '-',
    ]);
  });

  it('keeps an anonymous, refused request on one line of 26 fields whatever its headers hold (spaces, quotes, control characters)', () => {
    const line = accessLogLine({
      ...record,
      requester: undefined,
      key: undefined,
      httpStatus: 403,
      errorCode: 'AccessDenied',
      bytesSent: 0,
      objectSize: undefined,
      turnAroundTimeMs: undefined,
      userAgent: 'evil\r\n"agent"',
      referer: 'x" y',
      hostHeader: 'a b"c',
      signatureVersion: undefined,
      authType: undefined,
    });
    const f = fields(line);
    expect(line).to.not.match(/[\r\n]/);
    expect(f).to.have.length(26);
    expect([f[4], f[7], f[10], f[11], f[12], f[14], f[15], f[16], f[19], f[21], f[22]]).to.deep.equal([
      '-',
      '-',
      'AccessDenied',
      '-',
      '-',
      '-',
      'x" y',
      'evil"agent"',
      '-',
      '-',
      'a%20b%22c',
    ]);
  });

  it("keeps keys, URIs and agents with quotes and brackets readable as one field each (s3-tests' reading: brackets as quotes, then shell words)", () => {
    const line = accessLogLine({ ...record, key: "it's [1].txt", requestUri: "GET /photos/it's%20[1].txt HTTP/1.1", userAgent: "a [b] 'c'" });
    const shellWords = fields(line.replace(/[[\]]/g, '"'));
    expect(shellWords).to.have.length(26);
    expect([shellWords[7], shellWords[8], shellWords[16]]).to.deep.equal(['it%27s%20%5B1%5D.txt', "GET /photos/it's%20%5B1%5D.txt HTTP/1.1", "a %5Bb%5D 'c'"]);
  });

  it("names operations as S3's logs do", () => {
    expect(logOperation('GetObject', 'GET', true)).to.equal('REST.GET.OBJECT');
    expect(logOperation('CopyObject', 'PUT', true)).to.equal('REST.COPY.OBJECT');
    expect(logOperation('UploadPart', 'PUT', true)).to.equal('REST.PUT.PART');
    expect(logOperation('CompleteMultipartUpload', 'POST', true)).to.equal('REST.POST.UPLOAD');
    expect(logOperation('DeleteObjects', 'POST', false)).to.equal('REST.POST.MULTI_OBJECT_DELETE');
    expect(logOperation('ListObjectsV2', 'GET', false)).to.equal('REST.GET.BUCKET');
    expect(logOperation('PutBucketLogging', 'PUT', false)).to.equal('REST.PUT.LOGGING_STATUS');
    expect(logOperation('Unsupported:website', 'GET', false)).to.equal('REST.GET.BUCKET');
  });

  it("names log objects as S3: SimplePrefix by the delivery's time, PartitionedPrefix under owner/region/bucket/day", () => {
    const now = new Date('2026-03-04T05:06:07Z');
    const batch = { source: 'photos', owner: 'alice', rule: { targetBucket: 'logs', targetPrefix: 'p/' } };
    expect(logObjectKey(batch, 'us-east-1', now, 'ABCDEF0123456789')).to.equal('p/2026-03-04-05-06-07-ABCDEF0123456789');
    const partitioned = { ...batch, rule: { ...batch.rule, partitionDateSource: 'EventTime' as const }, eventDay: new Date('2026-03-03T00:00:00Z') };
    expect(logObjectKey(partitioned, 'us-east-1', now, 'U')).to.equal('p/alice/us-east-1/photos/2026/03/03/2026-03-04-05-06-07-U');
    const delivery = { ...batch, rule: { ...batch.rule, partitionDateSource: 'DeliveryTime' as const } };
    expect(logObjectKey(delivery, 'us-east-1', now, 'U')).to.equal('p/alice/us-east-1/photos/2026/03/04/2026-03-04-05-06-07-U');
  });
});
