import { expect } from 'chai';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import amqp from 'amqplib';
import { pino } from 'pino';
import { startImageSearch } from '../../images/image-search/src/app.js';
import { mirrorPathOf } from '../../images/image-search/src/bucket-source.js';
import type { ObjectEventSource, ObjectStoreEvent } from '../../images/image-search/src/object-events.js';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { AUTH_HEADER, colourImage, makeTestModel, PALETTE, tempDir, TEST_API_KEY } from './support/fixtures.js';
import { startS3rver, until, type TestS3 } from './support/s3rver.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function json(url: string, init: RequestInit = {}): Promise<any> {
  // As the admin: the bucket is private, and the source's details in /api/status are for admins.
  return (await fetch(url, { ...init, headers: { ...AUTH_HEADER, ...(init.headers as Record<string, string>) } })).json();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Status = any;

/** The service's /api/status, once `ready` holds for it. */
function statusWhen(service: RunningService, ready: (s: Status) => unknown): Promise<Status> {
  return until(async () => {
    const s = await json(`${service.url}/api/status`);
    return ready(s) ? s : undefined;
  });
}

function search(service: RunningService, query: string, topk: number) {
  return json(`${service.url}/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, topk }) });
}

describe('image-search: images from a bucket prefix of an S3 object store (IMAGE_SEARCH_SOURCE_S3_URL)', function () {
  this.timeout(120_000);
  let s3: TestS3;
  let service: RunningService;
  const dirs: string[] = [];
  const put = (key: string, body: Buffer | string) => s3.put('photos', key, body);

  /**
   * Fresh model, mirror and index dirs (removed after the suite) and a start of the service over them,
   * mirroring s3://photos/cams at start only, unless `env` says otherwise.
   */
  const mirror = (name: string, env: Record<string, string> = {}, objectEvents?: ObjectEventSource) => {
    const modelDir = makeTestModel();
    const imageDir = tempDir(`bucket-mirror-${name}`);
    const indexDir = tempDir(`bucket-index-${name}`);
    dirs.push(modelDir, imageDir, indexDir);
    const full = {
      PORT: '0',
      IMAGE_FILE_DIR: imageDir,
      IMAGE_SEARCH_MODEL_DIR: modelDir,
      IMAGE_SEARCH_INDEX_DIR: indexDir,
      IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/cams',
      IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '0',
      IMAGE_SEARCH_S3_ENDPOINT: s3.endpoint,
      IMAGE_SEARCH_S3_ACCESS_KEY_ID: 'S3RVER',
      IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: 'S3RVER',
      IMAGE_SEARCH_API_KEY: TEST_API_KEY,
      ...env,
    };
    return { imageDir, start: () => startImageSearch({ env: full, objectEvents, host: '127.0.0.1', logger: pino({ level: 'silent' }) }) };
  };

  before(async () => {
    s3 = await startS3rver(['photos']);
    let seed = 1;
    for (const colour of ['red', 'blue'] as const) {
      for (let i = 0; i < 2; i++) await put(`cams/${colour}/${i}.png`, await colourImage(PALETTE[colour], seed++));
    }
    await put('cams/notes.txt', 'not an image');
    await put('cams/broken.png', 'not an image either');
    await put('elsewhere/green.png', await colourImage(PALETTE.green, 50));
  });
  after(async () => {
    await service?.stop();
    await s3?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('mirrors and indexes the prefix at start, then picks up objects created later', async () => {
    const { imageDir, start } = mirror('sync', { IMAGE_SEARCH_SOURCE_SYNC_SECONDS: '1' });
    service = await start();
    const status = await statusWhen(service, (s) => s.source.lastSync);
    expect(status.source).to.deep.include({ kind: 'bucket', url: 's3://photos/cams', lastError: null });
    expect(status.source.lastSync).to.include({ listed: 6, downloaded: 5, added: 4 });
    expect(status.index.totalVectors).to.equal(4);
    expect(existsSync(path.join(imageDir, mirrorPathOf('photos', 'cams/red/0.png')))).to.equal(true);
    expect(existsSync(path.join(imageDir, 'notes.txt'))).to.equal(false);
    expect(existsSync(path.join(imageDir, 'green.png'))).to.equal(false);

    const reds = await search(service, 'red', 2);
    expect(reds.results.map((r: { path: string }) => r.path).sort()).to.deep.equal(
      [mirrorPathOf('photos', 'cams/red/0.png'), mirrorPathOf('photos', 'cams/red/1.png')].sort(),
    );
    const image = await fetch(service.url + reds.results[0].url);
    expect(image.status).to.equal(200);

    // An object created in the bucket reaches the index at the next round.
    await put('cams/yellow/new.png', await colourImage(PALETTE.yellow, 77));
    const found = await until(async () => {
      const r = await search(service, 'yellow', 1);
      return r.results[0]?.path === mirrorPathOf('photos', 'cams/yellow/new.png') ? r.results[0] : undefined;
    });
    // The bucket is private: its images' URLs are signed.
    expect(found.url).to.match(new RegExp(`^/images/${mirrorPathOf('photos', 'cams/yellow/new.png')}\\?expires=\\d+&signature=`));
    const index = await json(`${service.url}/api/index/status`);
    expect(index.totalVectors).to.equal(5);
  });

  it('indexes an object at once when its object-created event arrives (in-process broker contract)', async () => {
    let deliver: ((event: ObjectStoreEvent) => Promise<void>) | undefined;
    const broker: ObjectEventSource = {
      subscribe: async (queue, handler) => {
        expect(queue).to.equal('strata.image-search');
        deliver = handler;
        return { close: async () => undefined };
      },
    };
    // No polling: only the sync at start and events.
    const events = await mirror('events', {}, broker).start();
    try {
      const first = await statusWhen(events, (s) => s.source.lastSync);
      expect(first.source).to.include({ events: 'subscribed', eventsReceived: 0 });
      const before = first.index.totalVectors;
      await put('cams/green/late.png', await colourImage(PALETTE.green, 88));
      // Events about other buckets, other prefixes or other types are acknowledged and ignored.
      await deliver!({ id: 'e1', type: 'object.created', payload: { bucket: 'elsewhere', key: 'cams/green/late.png' } });
      await deliver!({ id: 'e2', type: 'object.created', payload: { bucket: 'photos', key: 'other/late.png' } });
      await deliver!({ id: 'e3', type: 'object.deleted', payload: { bucket: 'photos', key: 'cams/red/0.png' } });
      await deliver!({ id: 'e4', type: 'object.created', payload: { bucket: 'photos', key: 'cams/green/late.png' } });
      const after = await statusWhen(events, (s) => s.index.totalVectors === before + 1 && !s.source.syncing);
      expect(after.source.eventsReceived).to.equal(1);
      const greens = await search(events, 'green', 1);
      expect(greens.results[0].path).to.equal(mirrorPathOf('photos', 'cams/green/late.png'));
    } finally {
      await events.stop();
    }
  });

  it('drops images whose objects left the prefix when a recycle event arrives, and never touches files it did not mirror', async () => {
    await put('gone/red/a.png', await colourImage(PALETTE.red, 201));
    await put('gone/blue/b.png', await colourImage(PALETTE.blue, 202));
    let deliver: ((event: ObjectStoreEvent) => Promise<void>) | undefined;
    const broker: ObjectEventSource = {
      subscribe: async (_queue, handler) => {
        deliver = handler;
        return { close: async () => undefined };
      },
    };
    const { imageDir, start } = mirror('gone', { IMAGE_SEARCH_SOURCE_S3_URL: 's3://photos/gone', IMAGE_SEARCH_API_KEY: TEST_API_KEY }, broker);
    let running = await start();
    const synced = (predicate: (s: { index: { totalVectors: number }; source: { syncing: boolean; lastSync: { removed: number } | null } }) => boolean) =>
      statusWhen(running, (s) => s.source.lastSync && !s.source.syncing && predicate(s));
    try {
      await synced((s) => s.index.totalVectors === 2);
      // An image that did not come from the bucket: added by path, it must survive every sync.
      mkdirSync(path.join(imageDir, 'local'), { recursive: true });
      writeFileSync(path.join(imageDir, 'local', 'own.png'), await colourImage(PALETTE.red, 203));
      const add = await json(`${running.url}/api/index/add`, {
        method: 'POST',
        headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
        body: '{"image_paths":["local/own.png"]}',
      });
      expect(add.added).to.have.length(1);

      await s3.remove('photos', 'gone/red/a.png');
      await deliver!({ id: 'r1', type: 'object.recycled', payload: { bucket: 'photos', key: 'gone/red/a.png' } });
      const after = await synced((s) => s.source.lastSync?.removed === 1);
      expect(after.index.totalVectors).to.equal(2);
      expect(existsSync(path.join(imageDir, mirrorPathOf('photos', 'gone/red/a.png')))).to.equal(false);
      expect(existsSync(path.join(imageDir, 'local', 'own.png'))).to.equal(true);
      const reds = await search(running, 'red', 5);
      expect(reds.results.map((r: { path: string }) => r.path).sort()).to.deep.equal(['local/own.png', mirrorPathOf('photos', 'gone/blue/b.png')]);

      // The record survives a restart: an object deleted while the service was down goes at the first sync.
      await running.stop();
      await s3.remove('photos', 'gone/blue/b.png');
      running = await start();
      const restarted = await synced(() => true);
      expect(restarted.source.lastSync.removed).to.equal(1);
      expect(restarted.index.totalVectors).to.equal(1);
      expect(existsSync(path.join(imageDir, mirrorPathOf('photos', 'gone/blue/b.png')))).to.equal(false);
      expect(existsSync(path.join(imageDir, 'local', 'own.png'))).to.equal(true);
    } finally {
      await running.stop();
    }
  });

  it('takes object-created events from RabbitMQ (IMAGE_SEARCH_EVENTS_AMQP_URL)', async () => {
    const unique = `test-${process.pid}-${Date.now()}`;
    const exchange = `strata.events.${unique}`;
    const queue = `strata.image-search.${unique}`;
    const amqpUrl = process.env.STRATA_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
    // The object store's side: its topic exchange; the queue is declared and bound here too, so that
    // the event waits in it whenever the service's consumer connects.
    const connection = await amqp.connect(amqpUrl);
    const channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, 'object.created');
    const service = await mirror('amqp', {
      IMAGE_SEARCH_EVENTS_AMQP_URL: amqpUrl,
      IMAGE_SEARCH_EVENTS_EXCHANGE: exchange,
      IMAGE_SEARCH_EVENTS_QUEUE: queue,
    }).start();
    try {
      const first = await statusWhen(service, (s) => s.source.lastSync);
      const before = first.index.totalVectors;
      await put('cams/purple/amqp.png', await colourImage([130, 50, 170], 99));
      channel.publish(exchange, 'object.created', Buffer.from('not json'));
      channel.publish(
        exchange,
        'object.created',
        Buffer.from(
          JSON.stringify({
            id: 'evt-1',
            type: 'object.created',
            occurredAt: new Date().toISOString(),
            payload: { bucket: 'photos', key: 'cams/purple/amqp.png' },
          }),
        ),
      );
      await channel.waitForConfirms();
      const after = await statusWhen(service, (s) => s.index.totalVectors === before + 1);
      expect(after.source.eventsReceived).to.equal(1);
      // The queue is drained: the event was acknowledged, the malformed message dropped.
      const left = await until(async () => {
        const q = await channel.checkQueue(queue);
        return q.messageCount === 0 ? q : undefined;
      });
      expect(left.messageCount).to.equal(0);
    } finally {
      await service.stop();
      await channel.deleteQueue(queue);
      await channel.deleteExchange(exchange);
      await connection.close();
    }
  });

  it('reports a sync that the object store refuses, and keeps serving', async () => {
    const refused = await mirror('bad', { IMAGE_SEARCH_S3_ACCESS_KEY_ID: 'NOBODY' }).start();
    try {
      const status = await statusWhen(refused, (s) => s.source.lastError);
      expect(status.source.lastError).to.match(/answered 403 InvalidAccessKeyId/);
      expect(status.index.totalVectors).to.equal(0);
      expect((await fetch(`${refused.url}/api/index/status`)).status).to.equal(200);
    } finally {
      await refused.stop();
    }
  });
});
