import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { pino } from 'pino';
import { BucketSource } from '../../images/image-search/src/bucket-source.js';
import { ImageFiles } from '../../images/image-search/src/image-files.js';
import { standInIndex } from './support/acl-store.js';
import { tempDir } from './support/fixtures.js';

const BUCKET = 'gallery';

/**
 * An object store that lists one image and then hangs as told: `headers` never answers a request
 * for the object, `body` sends half of its bytes and then nothing. Other requests are answered.
 */
async function hangingStore(hang: 'all' | 'headers' | 'body'): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://store');
    if (hang === 'all') return;
    if (url.pathname === '/') {
      res.end(`<ListAllMyBucketsResult><Owner><ID>alice</ID></Owner><Buckets><Bucket><Name>${BUCKET}</Name></Bucket></Buckets></ListAllMyBucketsResult>`);
    } else if (url.searchParams.get('list-type') === '2') {
      res.end(
        `<ListBucketResult><Contents><Key>photos/a.png</Key><Size>1000</Size><ETag>"e1"</ETag></Contents><IsTruncated>false</IsTruncated></ListBucketResult>`,
      );
    } else if (hang === 'headers') {
      // never answered
    } else {
      res.writeHead(200, { 'content-length': '1000' });
      res.write(Buffer.alloc(500));
    }
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('image-search: a bucket source whose object store hangs', function () {
  this.timeout(30_000);
  const dirs: string[] = [];
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  const sourceOn = (endpoint: string) => {
    const dir = tempDir('hanging-store');
    dirs.push(dir);
    return new BucketSource({
      location: { endpoint, url: `s3://${BUCKET}/photos/`, region: 'us-east-1', accessKeyId: 'AK', secretAccessKey: 'SK' },
      files: new ImageFiles(dir),
      service: standInIndex(),
      logger: pino({ level: 'silent' }),
      requestIdleMs: 300,
    });
  };

  it('a round fails once the store has been silent for the limit (no answer at all), and is no longer running', async () => {
    const store = await hangingStore('all');
    const source = sourceOn(store.endpoint);
    try {
      const failure = await source.sync().then(
        () => undefined,
        (err: Error) => err,
      );
      expect(failure?.message, 'the round failed').to.match(/sent nothing for 300 ms/);
      expect(source.status()).to.include({ syncing: false });
      expect(source.status().lastError).to.match(/sent nothing for 300 ms/);
    } finally {
      await source.stop();
      await store.close();
    }
  });

  for (const hang of ['headers', 'body'] as const) {
    it(`a download that ${hang === 'headers' ? 'is never answered' : 'stops half-way'} is given up after the limit: the round ends, the object tried again next round`, async () => {
      const store = await hangingStore(hang);
      const source = sourceOn(store.endpoint);
      try {
        const result = await source.sync();
        expect(result.downloaded).to.equal(0);
        expect(result.skipped).to.have.length(1);
        expect(result.skipped[0]!.reason).to.match(/tried again next round.*sent nothing for 300 ms/);
      } finally {
        await source.stop();
        await store.close();
      }
    });
  }

  it('stop() gives up a round still waiting on the store after its grace', async () => {
    const store = await hangingStore('all');
    const dir = tempDir('hanging-store-stop');
    dirs.push(dir);
    const source = new BucketSource({
      location: { endpoint: store.endpoint, url: `s3://${BUCKET}/photos/`, region: 'us-east-1', accessKeyId: 'AK', secretAccessKey: 'SK' },
      files: new ImageFiles(dir),
      service: standInIndex(),
      logger: pino({ level: 'silent' }),
      requestIdleMs: 600_000,
      stopGraceMs: 100,
    });
    try {
      const round = source.sync().catch((err: Error) => err);
      await source.stop();
      expect(await round).to.be.an('error');
    } finally {
      await store.close();
    }
  });
});
