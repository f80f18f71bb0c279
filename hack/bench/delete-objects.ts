/**
 * DeleteObjects of 1000 keys (what `aws s3 rm --recursive` and `rclone purge` send) against 1000
 * DeleteObject calls on 16 connections, through the standalone gateway with SigV4. Prints deletes/s.
 *   npx tsx hack/bench/delete-objects.ts        (BENCH_KEYS, BENCH_ROUNDS, BENCH_ONLY=single|batch)
 */
import { CreateBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import { OBJECT_STORE_SERVICES, startPlatform } from '../../images/standalone/src/platform.js';

const KEYS = Number(process.env.BENCH_KEYS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const USER = 'bench-root';
const PASSWORD = 'bench-root-password';

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'strata-bench-del-'));
  const platform = await startPlatform(
    {
      dataDir,
      host: '127.0.0.1',
      ports: { gateway: 0, dataPlane: 0, controlPlane: 0 },
      rootUser: USER,
      rootPassword: PASSWORD,
      purgeSchedule: false,
      logLevel: 'warn',
    },
    OBJECT_STORE_SERVICES,
  );
  const s3 = new S3Client({
    endpoint: platform.urls.gateway,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: USER, secretAccessKey: PASSWORD },
    requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets: 16 }) }),
  });
  const Bucket = 'bench-delete';
  await s3.send(new CreateBucketCommand({ Bucket }));
  const keys = Array.from({ length: KEYS }, (_, i) => `dir/${String(i).padStart(6, '0')}`);
  const fill = async () => {
    const urls = keys.map((k) =>
      presignUrl({ method: 'PUT', origin, path: `/${Bucket}/${k}`, accessKey: USER, secret: PASSWORD, region: 'us-east-1', expiresSeconds: 600 }),
    );
    await onSixteenConnections(urls, (url) => send('PUT', url, 'x', 200));
  };
  const origin = platform.urls.gateway;
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  // Presigned requests over plain http: the SDK's own work per request (signing, middleware) would
  // cost more CPU in this process than a small write or delete itself.
  const send = (method: string, url: string, body: string | undefined, status: number) =>
    new Promise<void>((resolve, reject) => {
      const req = request(url, { method, agent }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === status ? resolve() : reject(new Error(`${method} answered ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  const onSixteenConnections = async (urls: string[], run: (url: string) => Promise<void>) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < urls.length) await run(urls[next++]);
      }),
    );
  };
  const left = async () => (await s3.send(new ListObjectsV2Command({ Bucket }))).KeyCount ?? 0;
  // The events of the fill (relayed, then consumed) must not run inside the timed part.
  const metric = async (service: string, name: string) => {
    const text = await (await fetch(`${platform.urls[service]}/metrics`)).text();
    return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };
  const settled = async () => {
    for (let last = -1; ; ) {
      await new Promise((r) => setTimeout(r, 200));
      const consumed = await metric('control-plane', 'strata_events_consumed_total');
      if ((await metric('data-plane', 'strata_outbox_backlog')) === 0 && consumed === last) return;
      last = consumed;
    }
  };
  const timed = async (name: string, run: () => Promise<void>) => {
    await fill();
    await settled();
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    await run();
    const cpu = process.cpuUsage(cpu0);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if ((await left()) !== 0) throw new Error(`${name} left objects behind`);
    // The process's CPU (every thread: client, gateway, planes, the PGlite thread) per deleted key.
    const cpuPerKey = (cpu.user + cpu.system) / 1000 / KEYS;
    console.log(
      `${name.padEnd(34)} ${ms.toFixed(0).padStart(7)} ms  ${((KEYS / ms) * 1000).toFixed(0).padStart(7)} deletes/s  ${cpuPerKey.toFixed(2)} CPU ms a key`,
    );
  };
  console.log(`${KEYS} keys of 1 byte, ${ROUNDS} rounds (standalone, PGlite)`);
  for (let r = 0; r < ROUNDS; r++) {
    if (process.env.BENCH_ONLY !== 'batch') {
      await timed('DeleteObject x N, 16 connections', async () => {
        const urls = keys.map((k) =>
          presignUrl({ method: 'DELETE', origin, path: `/${Bucket}/${k}`, accessKey: USER, secret: PASSWORD, region: 'us-east-1', expiresSeconds: 600 }),
        );
        await onSixteenConnections(urls, (url) => send('DELETE', url, undefined, 204));
      });
    }
    if (process.env.BENCH_ONLY !== 'single')
      await timed('DeleteObjects, 1000 keys a request', async () => {
        for (let i = 0; i < keys.length; i += 1000)
          await s3.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
      });
  }
  s3.destroy();
  await platform.stop();
  await rm(dataDir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
