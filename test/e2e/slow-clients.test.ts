import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { rawRequest } from '../support/http.js';
import { startTestPlatform, type TestPlatform } from './support/platform.js';
import { bucketName, login, s3ErrorOf } from './support/s3.js';

/** The gateway's idle-body limit here (S3's 20 s by default), short to keep the test short. */
const IDLE_MS = 1500;

/**
 * A PUT that announces 1000 bytes, sends 10 and then nothing, on a connection of its own. Resolves
 * with what the gateway answered ('' if it closed without an answer) once the connection ends.
 */
function tricklingPut(endpoint: string, path: string, token: string): Promise<string> {
  const u = new URL(endpoint);
  return new Promise((resolve) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(answer));
    socket.on('connect', () => {
      socket.write(`PUT ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\nContent-Length: 1000\r\n\r\n${'x'.repeat(10)}`);
    });
  });
}

const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);

describe('e2e: clients that trickle bodies hold nothing that others need', function () {
  this.timeout(120_000);
  let p: TestPlatform;
  let rootAuth: Record<string, string>;
  let bobToken: string;
  const rootBucket = bucketName('reads');
  const bobBucket = bucketName('trickle');

  before(async () => {
    p = await startTestPlatform(undefined, { gatewayBodyIdleTimeoutMs: IDLE_MS });
    const rootToken = await login(p.endpoint);
    rootAuth = { authorization: `Bearer ${rootToken}` };
    const created = await fetch(`${p.endpoint}/admin/users`, {
      method: 'POST',
      headers: { ...rootAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bob', password: 'bob-password-1' }),
    });
    expect(created.status).to.equal(201);
    bobToken = await login(p.endpoint, 'bob', 'bob-password-1');
    expect((await rawRequest(p.endpoint, 'PUT', `/${rootBucket}`, rootAuth)).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${bobBucket}`, { authorization: `Bearer ${bobToken}` })).status).to.equal(200);
    expect((await rawRequest(p.endpoint, 'PUT', `/${rootBucket}/o.txt`, rootAuth, 'still here')).status).to.equal(200);
  });
  after(async () => {
    await p?.destroy();
  });

  it("600 trickled PUTs of one tenant: another tenant's GETs keep answering, and every trickle is answered (RequestTimeout or SlowDown)", async () => {
    const trickles = Array.from({ length: 600 }, (_, i) => tricklingPut(p.endpoint, `/${bobBucket}/t-${i}`, bobToken));
    // Reads while the trickles hold their connections (the first ones stop before any idle limit could free them).
    for (let i = 0; i < 20; i++) {
      const r = await rawRequest(p.endpoint, 'GET', `/${rootBucket}/o.txt?proxy=true`, rootAuth);
      expect(r.status).to.equal(200);
      expect(r.body).to.equal('still here');
    }
    const answers = await Promise.all(trickles);
    // (Past a tenant's upload cap, SlowDown at once; the others RequestTimeout once idle. Which is which depends on timing.)
    for (const a of answers) {
      expect(statusOf(a)).to.be.oneOf([400, 503]);
      expect(s3ErrorOf(a).code).to.be.oneOf(['RequestTimeout', 'SlowDown']);
    }
    // Nothing was stored.
    const listing = await rawRequest(p.endpoint, 'GET', `/${bobBucket}?list-type=2`, { authorization: `Bearer ${bobToken}` });
    expect(listing.body).not.to.contain('<Key>');
  });

  it('a body that stops half-way is answered 400 RequestTimeout and stores nothing; one that keeps sending is not cut', async () => {
    const answer = await tricklingPut(p.endpoint, `/${bobBucket}/stalled`, bobToken);
    expect(statusOf(answer)).to.equal(400);
    expect(s3ErrorOf(answer).code).to.equal('RequestTimeout');
    const head = await rawRequest(p.endpoint, 'HEAD', `/${bobBucket}/stalled`, { authorization: `Bearer ${bobToken}` });
    expect(head.status).to.equal(404);

    // A slow but steady body (a byte every IDLE_MS / 3, longer in total than the idle limit) is stored.
    const u = new URL(p.endpoint);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: u.hostname, port: u.port, method: 'PUT', path: `/${bobBucket}/steady`, headers: { authorization: `Bearer ${bobToken}`, 'content-length': 6 } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      let sent = 0;
      const timer = setInterval(() => {
        req.write('s');
        if (++sent === 6) {
          clearInterval(timer);
          req.end();
        }
      }, IDLE_MS / 3);
    });
    expect(status).to.equal(200);
  });
});
