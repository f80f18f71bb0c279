import {
  CreateBucketCommand,
  DeleteBucketCommand,
  GetBucketLoggingCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutBucketLoggingCommand,
  PutObjectCommand,
  type BucketLoggingStatus,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import http from 'node:http';
import { eventually } from '../support/eventually.js';
import { platformHooks, ROOT_USER } from './support/platform.js';
import { bodyText, bucketName, createTenant, newBucket, s3Failure, sdkClient, type Tenant } from './support/s3.js';

/** One S3 access-log line split as clients split it (s3-tests: brackets read as quotes, then shell words). */
function fieldsOf(line: string): string[] {
  const fields: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|\[([^\]]*)\]|(\S+)/g;
  for (const m of line.matchAll(re)) fields.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? m[3])!);
  return fields;
}

/** The lines of every log object under `prefix` in `target`, with the objects' keys. */
async function logLines(s3: S3Client, target: string, prefix: string): Promise<{ keys: string[]; lines: string[][] }> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: target, Prefix: prefix }));
  const keys = (listed.Contents ?? []).map((o) => o.Key!);
  const lines: string[][] = [];
  for (const key of keys) {
    const text = await bodyText(await s3.send(new GetObjectCommand({ Bucket: target, Key: key })));
    lines.push(...text.split('\n').filter(Boolean).map(fieldsOf));
  }
  return { keys, lines };
}

const enable = (TargetBucket: string, TargetPrefix = 'log/', extra: Partial<BucketLoggingStatus['LoggingEnabled']> = {}): BucketLoggingStatus => ({
  LoggingEnabled: { TargetBucket, TargetPrefix, ...extra },
});

/** The platform's access-log line counts by outcome (strata_gateway_access_log_lines_total). */
async function lineCounts(endpoint: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^strata_gateway_access_log_lines_total\{[^}]*outcome="(\w+)"[^}]*\} (\S+)$/gm)) counts[m[1]!] = Number(m[2]);
  return counts;
}

/**
 * S3 server access logging: PutBucketLogging / GetBucketLogging as S3 validates and answers them, and delivery —
 * one S3 access-log line per request to a logged bucket, written as log objects into the target bucket.
 */
describe('e2e: bucket logging (server access logs)', function () {
  this.timeout(120_000);
  const p = platformHooks({ accessLog: { flushMs: 200, flushLines: 1000, bufferLines: 10_000 } });
  let s3: S3Client;
  let bob: Tenant;
  before(async () => {
    s3 = sdkClient(p.endpoint);
    bob = await createTenant(p.endpoint, 'logging-bob');
  });
  after(() => {
    s3?.destroy();
    bob?.s3.destroy();
  });

  it('round-trips the configuration (SimplePrefix named by default, PartitionedPrefix kept); an empty status turns it off; DELETE ?logging is no DeleteBucket', async () => {
    const source = await newBucket(s3, 'log-src');
    const target = await newBucket(s3, 'log-dst');
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.equal(undefined);
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(target) }));
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.deep.equal({
      TargetBucket: target,
      TargetPrefix: 'log/',
      TargetObjectKeyFormat: { SimplePrefix: {} },
    });
    const partitioned = { TargetObjectKeyFormat: { PartitionedPrefix: { PartitionDateSource: 'DeliveryTime' as const } } };
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(target, '', partitioned) }));
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.deep.equal({
      TargetBucket: target,
      TargetPrefix: '',
      ...partitioned,
    });
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: {} }));
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.equal(undefined);
    const del = await fetch(`${p.endpoint}/${source}?logging`, { method: 'DELETE', headers: { authorization: `Bearer ${await rootToken()}` } });
    expect(del.status).to.equal(501);
    await s3.send(new GetBucketLoggingCommand({ Bucket: source }));
  });

  it("refuses as S3 does: a target that does not exist or is another tenant's (InvalidTargetBucketForLogging, one answer for both), a bad key format; grants are not kept", async () => {
    const source = await newBucket(s3, 'log-src');
    const theirs = await newBucket(bob.s3, 'log-bob');
    const refusal = (status: BucketLoggingStatus, bucket = source, client = s3) =>
      s3Failure(client.send(new PutBucketLoggingCommand({ Bucket: bucket, BucketLoggingStatus: status })));
    expect(await refusal(enable(bucketName('log-none')))).to.deep.equal({ name: 'InvalidTargetBucketForLogging', status: 400 });
    expect(await refusal(enable(theirs))).to.deep.equal({ name: 'InvalidTargetBucketForLogging', status: 400 });
    const bad = { TargetObjectKeyFormat: { PartitionedPrefix: { PartitionDateSource: 'kaboom' as 'EventTime' } } };
    expect(await refusal(enable(source, 'log/', bad))).to.deep.equal({ name: 'MalformedXML', status: 400 });
    // Only the source's owner configures it; a bucket that does not exist is NoSuchBucket.
    expect(await refusal(enable(theirs), source, bob.s3)).to.deep.equal({ name: 'AccessDenied', status: 403 });
    expect(await refusal(enable(source), bucketName('log-none'))).to.deep.equal({ name: 'NoSuchBucket', status: 404 });
    // Nothing was stored by the refusals; a bucket may be its own target, as on S3.
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.equal(undefined);
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(source) }));
    // TargetGrants are accepted and not kept (as radosgw): the answer shows the configuration in effect, without them.
    const grants = { TargetGrants: [{ Grantee: { Type: 'CanonicalUser' as const, ID: 'logging-bob' }, Permission: 'READ' as const }] };
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(source, 'g/', grants) }));
    expect((await s3.send(new GetBucketLoggingCommand({ Bucket: source }))).LoggingEnabled).to.deep.equal({
      TargetBucket: source,
      TargetPrefix: 'g/',
      TargetObjectKeyFormat: { SimplePrefix: {} },
    });
  });

  it('writes one S3 access-log line per request (refused ones too) as a private log object <prefix>YYYY-mm-DD-HH-MM-SS-<unique> in a BucketOwnerEnforced target', async () => {
    const source = await newBucket(s3, 'log-src');
    const target = await newBucket(s3, 'log-dst');
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(target, 'access/') }));
    await s3.send(new PutObjectCommand({ Bucket: source, Key: 'dir/hello world.txt', Body: 'hello, world' }));
    await s3.send(new GetObjectCommand({ Bucket: source, Key: 'dir/hello world.txt' })).then(bodyText);
    await s3.send(new HeadObjectCommand({ Bucket: source, Key: 'dir/hello world.txt' }));
    expect((await s3Failure(s3.send(new GetObjectCommand({ Bucket: source, Key: 'missing' })))).status).to.equal(404);
    // Virtual-hosted style (`<bucket>.localhost`): the line names the target the client sent.
    const port = new URL(p.endpoint).port;
    const hosted = await new Promise<number>((resolve, reject) =>
      http
        .get({ host: '127.0.0.1', port, path: '/dir/hello%20world.txt', headers: { host: `${source}.localhost:${port}` } }, (r) => {
          r.resume();
          resolve(r.statusCode!);
        })
        .on('error', reject),
    );
    expect(hosted).to.equal(403);
    const anonymous = await fetch(`${p.endpoint}/${source}/dir/hello%20world.txt`, {
      headers: { 'user-agent': 'curl/8 "quoted"', referer: 'https://example.com/' },
    });
    expect(anonymous.status).to.equal(403);
    await anonymous.text();

    const { keys, lines } = await eventually(async () => {
      const found = await logLines(s3, target, 'access/');
      return found.lines.length >= 6 && found;
    }, 'the log lines in the target');
    for (const key of keys) expect(key).to.match(/^access\/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/);
    for (const f of lines) {
      expect(f, f.join(' ')).to.have.length(26);
      expect([f[0], f[1]]).to.deep.equal([ROOT_USER, source]);
      expect(f[2]).to.match(/^\d{2}\/[A-Z][a-z]{2}\/\d{4}:\d{2}:\d{2}:\d{2} \+0000$/);
      expect(f[5]).to.match(/^[0-9A-F]{16}$/);
    }
    // (Lines of one request each; the log may come as several objects, so the root's lines are told from the anonymous one by requester.)
    const byOp = (op: string, key: string) => lines.find((f) => f[6] === op && f[7] === key && f[4] === ROOT_USER);
    const put = byOp('REST.PUT.OBJECT', 'dir/hello%20world.txt')!;
    expect([put[4], put[8], put[9], put[10], put[12], put[19], put[21]]).to.deep.equal([
      ROOT_USER,
      `PUT /${source}/dir/hello%20world.txt?x-id=PutObject HTTP/1.1`,
      '200',
      '-',
      '12',
      'SigV4',
      'AuthHeader',
    ]);
    // Total and turn-around times in whole ms.
    expect(
      [put[13], put[14]].every((t) => /^\d+$/.test(t!)),
      put.join(' '),
    ).to.equal(true);
    const get = byOp('REST.GET.OBJECT', 'dir/hello%20world.txt')!;
    expect([get[9], get[11], get[12]]).to.deep.equal(['200', '12', '12']);
    expect(Number(get[13])).to.be.at.least(0);
    expect(byOp('REST.HEAD.OBJECT', 'dir/hello%20world.txt')![9]).to.equal('200');
    const missing = byOp('REST.GET.OBJECT', 'missing')!;
    expect([missing[9], missing[10]]).to.deep.equal(['404', 'NoSuchKey']);
    const refused = lines.find((f) => f[4] === '-' && f[8]!.startsWith(`GET /${source}/`))!;
    const virtual = lines.find((f) => f[4] === '-' && f[8] === 'GET /dir/hello%20world.txt HTTP/1.1')!;
    expect([virtual[1], virtual[7], virtual[22]]).to.deep.equal([source, 'dir/hello%20world.txt', `${source}.localhost:${port}`]);
    expect([refused[6], refused[9], refused[10], refused[15], refused[16], refused[19]]).to.deep.equal([
      'REST.GET.OBJECT',
      '403',
      'AccessDenied',
      'https://example.com/',
      'curl/8 "quoted"',
      '-',
    ]);
    // The log objects are the target owner's and private: no anonymous read.
    expect((await fetch(`${p.endpoint}/${target}/${keys[0]}`)).status).to.equal(403);
  });

  it('never logs its own log writes (a bucket that is its own target) and names PartitionedPrefix objects <prefix><owner>/<region>/<bucket>/YYYY/mm/DD/…', async () => {
    const source = await newBucket(s3, 'log-self');
    const partitioned = { TargetObjectKeyFormat: { PartitionedPrefix: { PartitionDateSource: 'EventTime' as const } } };
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(source, 'logs/', partitioned) }));
    await s3.send(new PutObjectCommand({ Bucket: source, Key: 'a', Body: 'x' }));
    const first = await eventually(async () => (await s3.send(new ListObjectsV2Command({ Bucket: source, Prefix: 'logs/' }))).KeyCount === 1, 'a log object');
    expect(first).to.equal(true);
    await s3.send(new PutObjectCommand({ Bucket: source, Key: 'b', Body: 'y' }));
    const { keys, lines } = await eventually(async () => {
      const found = await logLines(s3, source, 'logs/');
      return found.lines.some((f) => f[7] === 'b') && found;
    }, 'the second put logged');
    const day = new Date().toISOString().slice(0, 10).replace(/-/g, '/');
    for (const key of keys) expect(key.startsWith(`logs/${ROOT_USER}/us-east-1/${source}/${day}/`), key).to.equal(true);
    // Only the client's two PUTs: none of the log objects written into this same bucket (objects of one second sort by their unique part).
    const puts = lines.filter((f) => f[6] === 'REST.PUT.OBJECT').map((f) => f[7]);
    expect(puts.sort()).to.deep.equal(['a', 'b']);
  });

  it('a target that fails (deleted) never fails the requests: their lines are counted undeliverable', async () => {
    const source = await newBucket(s3, 'log-src');
    const target = await newBucket(s3, 'log-gone');
    await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(target) }));
    await s3.send(new DeleteBucketCommand({ Bucket: target }));
    const before = (await lineCounts(p.endpoint)).undeliverable ?? 0;
    for (let i = 0; i < 3; i++) await s3.send(new PutObjectCommand({ Bucket: source, Key: `k${i}`, Body: 'x' }));
    await eventually(async () => ((await lineCounts(p.endpoint)).undeliverable ?? 0) >= before + 3, 'the lines counted undeliverable');
    // A name another tenant takes after the delete (once the control plane's hold on it ends) gets none of this bucket's lines.
    await eventually(() => bob.s3.send(new CreateBucketCommand({ Bucket: target })), 'the name free for another tenant');
    await s3.send(new PutObjectCommand({ Bucket: source, Key: 'after', Body: 'x' }));
    await eventually(async () => ((await lineCounts(p.endpoint)).undeliverable ?? 0) >= before + 4, 'the line counted undeliverable');
    expect((await bob.s3.send(new ListObjectsV2Command({ Bucket: target }))).KeyCount).to.equal(0);
  });

  async function rootToken(): Promise<string> {
    const r = await fetch(`${p.endpoint}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: ROOT_USER, password: 'strata-e2e-password' }),
    });
    return ((await r.json()) as { data: { token: string } }).data.token;
  }
});

describe('e2e: bucket logging with a small buffer (drop and count; written on graceful shutdown)', function () {
  // (Two platform starts and a stop: slow on a loaded machine.)
  this.timeout(300_000);
  it('keeps at most bufferLines lines, counts the rest dropped, and writes what it holds when the gateway stops', async () => {
    // Lines: PutBucketLogging's own (S3 logs it too), then k0; k1…k4 find the buffer full.
    const { startTestPlatform } = await import('./support/platform.js');
    let p = await startTestPlatform(undefined, { accessLog: { flushMs: 3_600_000, flushLines: 1000, bufferLines: 2 } });
    let s3 = sdkClient(p.endpoint);
    try {
      const source = await newBucket(s3, 'log-src');
      const target = await newBucket(s3, 'log-dst');
      await s3.send(new PutBucketLoggingCommand({ Bucket: source, BucketLoggingStatus: enable(target) }));
      for (let i = 0; i < 5; i++) await s3.send(new PutObjectCommand({ Bucket: source, Key: `k${i}`, Body: 'x' }));
      await eventually(async () => (await lineCounts(p.endpoint)).buffer_full === 4, 'four lines dropped');
      expect((await s3.send(new ListObjectsV2Command({ Bucket: target }))).KeyCount).to.equal(0);
      s3.destroy();
      await p.stop();
      p = await startTestPlatform(p.dataDir);
      s3 = sdkClient(p.endpoint);
      const { lines } = await logLines(s3, target, 'log/');
      expect(lines.map((f) => [f[6], f[7]])).to.deep.equal([
        ['REST.PUT.LOGGING_STATUS', '-'],
        ['REST.PUT.OBJECT', 'k0'],
      ]);
    } finally {
      s3.destroy();
      await p.destroy();
    }
  });
});
