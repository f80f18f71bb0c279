import { expect } from 'chai';
import net from 'node:net';
import { rawRequest } from '../support/http.js';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bearer, bucketName, createTenant, login, s3ErrorOf } from './support/s3.js';
import { eventually } from '../gateway-flow-control/support.js';

/**
 * Small pools and a short rate window keep the attacks small and short: each abusive account may
 * hold 8 reads and 8 uploads, and a transfer must move 64 KiB/s over each 1 s window.
 */
const RULES = `
concurrency: { readsPerUser: 8, uploadsPerUser: 8, readPool: 64, uploadPool: 64 }
transfer: { minBytesPerSecond: 65536, windowMs: 1000 }
connections: { perAddress: 120, total: 5000 }
`;
/** A well-behaved tenant's GET, PUT and LIST during an attack: at most 1 s (measured: under 300 ms with the whole suite running beside it). */
const BOUND_MS = 1000;
const ABUSERS = ['mallory1', 'mallory2', 'mallory3'];
/** Larger than what the kernel's socket buffers take of an answer nobody reads (several MiB on loopback). */
const BIG = 32 * 1024 * 1024;

const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);

/**
 * A GET on a connection of its own (closed after the answer) whose client reads nothing until
 * `drain()`; then how many bytes came before the close.
 */
function slowReader(endpoint: string, path: string, token: string): { drain: () => Promise<number>; socket: net.Socket } {
  const u = new URL(endpoint);
  const socket = net.connect(Number(u.port), u.hostname);
  socket.on('error', () => undefined);
  socket.pause();
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`);
  const drain = () =>
    new Promise<number>((resolve) => {
      let bytes = 0;
      socket.on('data', (c: Buffer) => (bytes += c.length));
      socket.once('close', () => resolve(bytes));
      socket.resume();
    });
  return { drain, socket };
}

/** A PUT announcing 1000 bytes that sends one every 250 ms: resolves with what the gateway answered once the connection ends. */
function tricklingPut(endpoint: string, path: string, token: string): Promise<string> {
  const u = new URL(endpoint);
  return new Promise((resolve) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let answer = '';
    const drip = setInterval(() => socket.write('x'), 250);
    socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(drip);
      resolve(answer);
    });
    socket.write(`PUT ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nContent-Length: 1000\r\n\r\nx`);
  });
}

async function metricLines(endpoint: string, name: string): Promise<string[]> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(name));
}

async function metric(endpoint: string, name: string, labels: Record<string, string>): Promise<number> {
  const line = (await metricLines(endpoint, name)).find((l) => Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('e2e: fair shares: abusive tenants cannot starve a well-behaved one', function () {
  this.timeout(180_000);
  let p: TestPlatform;
  let alice: Record<string, string>;
  const aliceBucket = bucketName('alice');
  const tokens = new Map<string, string>();
  const bucketOf = (user: string) => `${user}-${aliceBucket}`.slice(0, 63);

  before(async () => {
    p = await startTestPlatform(undefined, { gatewayRules: RULES });
    for (const user of ['alice', ...ABUSERS]) {
      const tenant = await createTenant(p.endpoint, user);
      tenant.s3.destroy();
      tokens.set(user, await login(p.endpoint, user, tenant.password));
    }
    alice = bearer(tokens.get('alice')!);
    expect((await rawRequest(p.endpoint, 'PUT', `/${aliceBucket}`, alice)).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${aliceBucket}/big`, alice, Buffer.alloc(1024 * 1024, 7))).status).to.equal(200);
    for (const user of ABUSERS) {
      const auth = bearer(tokens.get(user)!);
      expect((await rawRequest(p.endpoint, 'PUT', `/${bucketOf(user)}`, auth)).status).to.equal(200);
      expect((await rawRequest(p.endpoint, 'PUT', `/${bucketOf(user)}/big`, auth, Buffer.alloc(BIG, 1))).status).to.equal(200);
    }
  });
  after(async () => {
    await p?.destroy();
  });

  /** Alice's GET (uncached, 1 MiB), PUT and LIST: each 2xx within the bound. */
  async function aliceIsServed(round: number): Promise<void> {
    const timed = async (what: string, call: Promise<{ status: number; body: string }>, check: (r: { status: number; body: string }) => void) => {
      const started = Date.now();
      const r = await call;
      const took = Date.now() - started;
      expect(r.status, `${what}: ${r.body.slice(0, 200)}`).to.equal(200);
      expect(took, `${what} took ${took} ms`).to.be.below(BOUND_MS);
      check(r);
    };
    await timed('GET', rawRequest(p.endpoint, 'GET', `/${aliceBucket}/big?proxy=true`, alice), (r) => expect(r.body.length).to.equal(1024 * 1024));
    await timed('PUT', rawRequest(p.endpoint, 'PUT', `/${aliceBucket}/put-${round}`, alice, `round ${round}`), () => undefined);
    await timed('LIST', rawRequest(p.endpoint, 'GET', `/${aliceBucket}?list-type=2`, alice), (r) => expect(r.body).to.contain('<Key>big</Key>'));
  }

  async function noBreakerOpened(): Promise<void> {
    expect((await metricLines(p.endpoint, 'strata_gateway_breaker_transitions_total')).filter((l) => l.includes('to="open"'))).to.deep.equal([]);
  }

  it('slow readers: 3 accounts × 24 unread GETs of a 32 MiB object; each holds 8 reads, each for a couple of rate windows', async () => {
    const rssBefore = process.memoryUsage().rss;
    const readers = ABUSERS.flatMap((user) => Array.from({ length: 24 }, () => slowReader(p.endpoint, `/${bucketOf(user)}/big?proxy=true`, tokens.get(user)!)));
    try {
      for (let round = 0; round < 3; round++) await aliceIsServed(round);
      // Memory stays bounded: no unread answer is buffered whole (72 × 32 MiB would be 2.3 GiB).
      expect(process.memoryUsage().rss - rssBefore).to.be.below(256 * 1024 * 1024);
      // Every reader is refused (past the account's 8 in flight) or admitted and then cut by the minimum
      // rate (the kernel's buffers take the first window's bytes); a cut frees a slot for a later one.
      const ended = async (user: string) =>
        (await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: user, reason: 'reads-tenant-cap' })) +
        (await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: user, reason: 'slow-reader' }));
      const cut = async () => {
        for (const user of ABUSERS) if ((await ended(user)) < 24) return false;
        return true;
      };
      await eventually(cut, 'the slow readers cut', 15_000);
      // Each reader, once it reads, got a SlowDown (past the account's 8) or an answer cut by the rate
      // window: none of them the whole object.
      const received = await Promise.all(readers.map((r) => r.drain()));
      for (const bytes of received) expect(bytes).to.be.below(BIG);
    } finally {
      for (const r of readers) r.socket.destroy();
    }
    await noBreakerOpened();
    for (const user of ABUSERS) {
      expect(await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: user, reason: 'reads-tenant-cap' })).to.be.at.least(1);
      expect(await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: user, reason: 'slow-reader' })).to.be.at.least(8);
    }
    await aliceIsServed(3);
  });

  it('trickled uploads: 3 accounts × 16 PUTs sending a byte every 250 ms; each holds 8 uploads, cut within a rate window or two', async () => {
    const started = Date.now();
    const trickles = ABUSERS.map((user) =>
      Promise.all(Array.from({ length: 16 }, (_, i) => tricklingPut(p.endpoint, `/${bucketOf(user)}/t-${i}`, tokens.get(user)!))),
    );
    for (let round = 10; round < 13; round++) await aliceIsServed(round);
    const answers = await Promise.all(trickles);
    // A byte every 250 ms never trips the 20 s idle limit: only the minimum rate ends these, within seconds.
    expect(Date.now() - started).to.be.below(15_000);
    for (const [i, user] of ABUSERS.entries()) {
      const codes = answers[i]!.map((a) => `${statusOf(a)} ${s3ErrorOf(a).code}`);
      // Admitted (8 at a time: a cut one frees a slot for a later one) and cut, or refused at once.
      expect(codes.filter((c) => c === '400 RequestTimeout').length).to.be.within(8, 15);
      expect(codes.filter((c) => c === '503 SlowDown').length).to.be.at.least(1);
      expect(codes.filter((c) => c !== '400 RequestTimeout' && c !== '503 SlowDown')).to.deep.equal([]);
      const listing = await rawRequest(p.endpoint, 'GET', `/${bucketOf(user)}?list-type=2`, bearer(tokens.get(user)!));
      expect(listing.body).not.to.contain('<Key>t-');
      // Every admitted body is cut by the rate; a refused one's rest is never read (its answer closes the connection).
      expect(await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: user, reason: 'slow-body' })).to.equal(
        codes.filter((c) => c === '400 RequestTimeout').length,
      );
    }
    await noBreakerOpened();
  });

  it('idle connections: 170 from one address, past its 120 the gateway closes them at once; other addresses are served', async () => {
    const u = new URL(p.endpoint);
    const closedEarly: net.Socket[] = [];
    const sockets = await Promise.all(
      Array.from(
        { length: 170 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const s = net.connect({ host: u.hostname, port: Number(u.port), localAddress: '127.0.0.2' });
            s.on('error', () => undefined);
            s.once('close', () => closedEarly.push(s));
            s.once('connect', () => resolve(s));
          }),
      ),
    );
    try {
      await eventually(() => closedEarly.length >= 50, 'the connections past the cap closed', 5000);
      expect(closedEarly).to.have.length(50);
      for (let round = 20; round < 23; round++) await aliceIsServed(round);
      expect(await metric(p.endpoint, 'strata_gateway_tenant_rejections_total', { tenant: '-', reason: 'connections-per-address' })).to.equal(50);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});
