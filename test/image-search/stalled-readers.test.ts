import net from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { eventually } from '../support/eventually.js';
import { fixtureHooks } from '../support/fixture-hooks.js';
import { AUTH_HEADER, startTestImageSearch } from './support/fixtures.js';

/** Image bytes for a client that stops reading them: its connection is cut (and the file read with it); one that pauses less is not. */
describe('image-search: readers that never read', () => {
  // Progress is seen by bytes the server's socket has written: a reader frees the kernel's send buffer a third at a
  // time (when Linux signals it writable), so the limit must leave a reading client time for that even on a loaded
  // host (300 ms cut a pausing reader now and then in full runs).
  const IDLE_MS = 1_000;
  // More than the kernel buffers between the two ends of a loopback connection (a few MB).
  const SIZE = 24 * 1024 * 1024;
  const env = fixtureHooks(
    'suite',
    async () => {
      const search = await startTestImageSearch('stalled-readers', { readerIdleTimeoutMs: IDLE_MS });
      // Served as bytes (no decoding).
      writeFileSync(path.join(search.images.dir, 'big.png'), Buffer.alloc(SIZE, 7));
      return search;
    },
    (f) => f.close(),
  );

  /** GET the big image on a raw connection: read nothing, or read with a pause of `pauseMs` after each MB. */
  const fetchBig = (pauseMs: number | 'never') => {
    let received = 0;
    let closed = false;
    const socket = net.connect(env.service.port, '127.0.0.1', () => {
      socket.write(`GET /images/big.png HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH_HEADER.authorization}\r\nConnection: close\r\n\r\n`);
      if (pauseMs === 'never') socket.pause();
    });
    socket.on('data', (chunk: Buffer) => {
      const before = received;
      received += chunk.length;
      if (pauseMs === 'never' || Math.floor(before / 2 ** 20) === Math.floor(received / 2 ** 20)) return;
      socket.pause();
      setTimeout(() => socket.resume(), pauseMs);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => (closed = true));
    return { socket, received: () => received, closed: () => closed };
  };
  const connections = () => new Promise<number>((resolve, reject) => env.service.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));

  it('a client that reads nothing of a large image is cut; one that pauses for less than the limit gets all of it', async () => {
    const stalled = Array.from({ length: 3 }, () => fetchBig('never'));
    const pausing = fetchBig(150);
    try {
      await eventually(() => expect(pausing.closed()).to.equal(true), 'the pausing reader done', 60_000);
      expect(pausing.received()).to.be.greaterThan(SIZE);
      // The stalled ones: their connections are gone on the server's side (they would notice if they read).
      await eventually(async () => expect(await connections()).to.equal(0), 'stalled readers cut', 15_000);
      for (const s of stalled) s.socket.resume();
      await eventually(() => expect(stalled.map((s) => s.closed())).to.deep.equal([true, true, true]), 'stalled readers see the end');
      for (const s of stalled) expect(s.received()).to.be.lessThan(SIZE);
    } finally {
      for (const s of [...stalled, pausing]) s.socket.destroy();
    }
    expect((await fetch(`${env.service.url}/healthz`)).status).to.equal(200);
  });
});
