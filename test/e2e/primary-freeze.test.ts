import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { productionSettings } from '../../images/service-kit/src/index.js';
import { loadStandaloneEnv } from '../../images/standalone/src/config.js';
import { OBJECT_STORE_SERVICES, startPlatform, type RunningPlatform } from '../../images/standalone/src/platform.js';
import { eventually } from '../events/rabbitmq-fixture.js';
import { startPgReplica, type PgReplicaHarness } from '../support/pg-replica.js';
import { startTcpProxy, type TcpFaultProxy } from '../support/tcp-proxy.js';
import { JWT_SECRET, ROOT_PASSWORD, ROOT_USER } from './support/platform.js';
import { replicatedDatabase } from './support/production.js';
import { bodyText, bucketName, createTenant, s3Failure, sdkClient, type Tenant } from './support/s3.js';
import { S3ServiceException } from '@aws-sdk/client-s3';

/**
 * The PostgreSQL primary freezes (a TCP proxy in front of it stalls: connections stay open and no byte
 * moves, as with a SIGSTOPped server) while its streaming replica stays healthy: SigV4 GETs keep
 * answering from the replica path, PUTs fail fast with 503, and PUTs work again soon after the primary
 * answers again.
 */
describe('e2e: a frozen PostgreSQL primary with a healthy replica', function () {
  this.timeout(120_000);
  let pgh: PgReplicaHarness;
  let proxy: TcpFaultProxy;
  let dataDir: string;
  let platform: RunningPlatform;
  let root: S3Client;
  let tenant: Tenant;
  const bucket = bucketName('freeze');

  before(async () => {
    pgh = await startPgReplica();
    const dbUrl = await replicatedDatabase(pgh, 'strata');
    // The platform reaches the primary through the proxy; the replica streams from it directly.
    proxy = await startTcpProxy({ port: Number(new URL(pgh.primaryUrl).port) });
    const primaryViaProxy = Object.assign(new URL(dbUrl(pgh.primaryUrl)), { port: String(proxy.port) }).toString();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-freeze-'));
    const env = loadStandaloneEnv({
      STRATA_DATA_DIR: dataDir,
      STRATA_PG_URL: primaryViaProxy,
      STRATA_PG_REPLICA_URLS: dbUrl(pgh.replicaUrl),
      STRATA_PG_CONNECT_TIMEOUT_MS: '1000',
      STRATA_PG_STATEMENT_TIMEOUT_MS: '1500',
      STRATA_PG_QUERY_TIMEOUT_MS: '2000',
    });
    platform = await startPlatform(
      {
        dataDir,
        host: '127.0.0.1',
        ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
        rootUser: ROOT_USER,
        rootPassword: ROOT_PASSWORD,
        jwtSecret: JWT_SECRET,
        purgeSchedule: false,
        logLevel: process.env.STRATA_E2E_LOG_LEVEL ?? 'silent',
        production: productionSettings(env),
      },
      OBJECT_STORE_SERVICES,
    );
    root = sdkClient(platform.urls.gateway);
    tenant = await createTenant(platform.urls.gateway, `freeze${Date.now().toString(36)}`);
    await tenant.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    for (let i = 0; i < 5; i++) await tenant.s3.send(new PutObjectCommand({ Bucket: bucket, Key: `o${i}.txt`, Body: `object ${i}` }));
    await pgh.waitForReplay();
  });
  after(async () => {
    proxy?.restore();
    root?.destroy();
    tenant?.s3.destroy();
    await platform?.stop();
    await proxy?.close();
    await pgh?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** Reads of the platform's SQL client that a replica answered for `reason` so far. */
  const replicaReads = async (reason: string): Promise<number> => {
    const metrics = await (await fetch(`${platform.urls['control-plane']}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('strata_sql_reads_total{') && l.includes('target="replica"') && l.includes(`reason="${reason}"`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  it('GETs signed with SigV4 answer 200 during the freeze, PUTs 503 fast; PUTs recover after the primary returns', async () => {
    const [credentialReads, objectReads] = [await replicaReads('stale-ok'), await replicaReads('primary-unreachable')];
    proxy.stall();
    try {
      // Longer than any credential or answer cache of the gateway and data plane: lookups must reach the database.
      const until = Date.now() + 12_000;
      let i = 0;
      while (Date.now() < until) {
        const n = i++ % 5;
        const got = await tenant.s3.send(new GetObjectCommand({ Bucket: bucket, Key: `o${n}.txt` }));
        expect(await bodyText(got)).to.equal(`object ${n}`);
      }
      const started = Date.now();
      const put = await s3Failure(tenant.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'during.txt', Body: 'written while frozen' })));
      expect(put.status).to.equal(503);
      expect(Date.now() - started, 'PUT answered within').to.be.below(10_000);
      // Reads still answer after a failed write (its outcome unknown to the platform).
      const got = await tenant.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'o1.txt' }));
      expect(await bodyText(got)).to.equal('object 1');
      // The replica answered the credential lookups (past the gateway's cache) and the object reads.
      expect(await replicaReads('stale-ok')).to.be.above(credentialReads);
      expect(await replicaReads('primary-unreachable')).to.be.above(objectReads);
    } finally {
      proxy.restore();
    }
    const restored = Date.now();
    await eventually(
      async () => {
        try {
          await tenant.s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'after.txt', Body: 'after the freeze' }));
          return true;
        } catch {
          return false;
        }
      },
      'a PUT after the primary returned',
      10_000,
    );
    expect(Date.now() - restored, 'PUTs work again within').to.be.below(5_000);
    expect(await bodyText(await tenant.s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'after.txt' })))).to.equal('after the freeze');
  });

  /** Runs an S3 call until it succeeds (after the primary's return), each failure a 503, never another status. */
  const untilServed = async <T>(call: () => Promise<T>, what: string): Promise<T> => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!(err instanceof S3ServiceException)) throw err;
        expect(err.$metadata.httpStatusCode, `${what}: ${err.name}`).to.equal(503);
        if (Date.now() > deadline) throw new Error(`${what}: still 503 after 15 s`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  };

  it('UploadPart and CompleteMultipartUpload during the freeze answer 200 or 503, never 500; after the return the upload completes byte for byte', async () => {
    const key = 'multipart-across-the-freeze.bin';
    const { UploadId } = await tenant.s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const parts = [Buffer.alloc(5 * 1024 * 1024, 'a'), Buffer.from('the last part, sent while the primary was frozen')];
    const first = await tenant.s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: parts[0] }));
    const uploadLast = () => tenant.s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: parts[1] }));
    const complete = (etags: string[]) =>
      tenant.s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
        }),
      );
    let lastEtag: string | undefined;
    proxy.stall();
    try {
      try {
        lastEtag = (await uploadLast()).ETag;
      } catch (err) {
        expect((err as S3ServiceException).$metadata?.httpStatusCode, 'UploadPart while frozen').to.equal(503);
      }
      if (lastEtag) {
        // The commit needs the primary: refused with 503 (its outcome decided later), never a 500.
        const failed = await s3Failure(complete([first.ETag!, lastEtag]));
        expect(failed.status, `Complete while frozen: ${failed.name}`).to.equal(503);
      }
    } finally {
      proxy.restore();
    }
    lastEtag ??= (await untilServed(uploadLast, 'UploadPart after the return')).ETag;
    await untilServed(() => complete([first.ETag!, lastEtag!]), 'Complete after the return');
    const got = await tenant.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat(parts))).to.equal(true);
  });
});
