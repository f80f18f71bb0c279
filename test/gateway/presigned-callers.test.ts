import { expect } from 'chai';
import type http from 'node:http';
import { authenticate } from '../../images/gateway/src/auth/authenticate.js';
import { cachedCredentials } from '../../images/gateway/src/auth/credential-cache.js';
import { forgetVerdicts } from '../../images/gateway/src/auth/presigned-verdicts.js';
import { presignUrl } from '../../images/gateway/src/auth/sigv4.js';
import type { BearerAuthenticator } from '../../images/gateway/src/auth/jwt.js';
import type { Credential } from '../../images/gateway/src/auth/sigv4-verify.js';
import { state, type Caller } from '../../images/gateway/src/context.js';
import { S3Error } from '../../images/object-model/src/index.js';

/**
 * The requests of a hot presigned URL share one verified answer and one Caller (authenticate.ts, presigned-verdicts.ts
 * verdictAnswer): who calls is the same as a full verification says, and a credential the lookup answers anew
 * (its cache refilled, its secret the same) gets a caller of its own.
 */
describe('gateway: callers of presigned URLs fetched again', () => {
  const origin = 'http://127.0.0.1:9000';
  let cred: Credential;
  const auth = authenticate({
    passport: {} as BearerAuthenticator,
    credentials: async (accessKey) => {
      if (accessKey !== cred.accessKey) throw new Error(`unknown key ${accessKey}`);
      return cred;
    },
    rootUser: 'strata',
    region: 'us-east-1',
    signatureV2: true,
  });
  const presign = (accessKey: string, secret: string) =>
    presignUrl({ method: 'GET', origin, path: '/bkt/k.bin', accessKey, secret, region: 'us-east-1', expiresSeconds: 600 }).slice(origin.length);
  const callerOf = async (url: string): Promise<Caller> => {
    const req = { method: 'GET', url, headers: { host: '127.0.0.1:9000' } } as unknown as http.IncomingMessage;
    const res = {} as http.ServerResponse;
    state(res).operation = 'GetObject';
    let failed: unknown;
    await auth(req, res, (err) => (failed = err));
    if (failed !== undefined) throw failed;
    return state(res).caller!;
  };

  beforeEach(() => forgetVerdicts());

  it('gives every request of the URL the same caller while the lookup answers the same credential', async () => {
    cred = { username: 'alice', accessKey: 'AKALICE', secretKey: 'alice-secret-0123456789' };
    const url = presign('AKALICE', cred.secretKey);
    const first = await callerOf(url);
    expect([first.username, first.accessKey, first.isRoot, first.via, first.sigv4?.credential]).to.deep.equal(['alice', 'AKALICE', false, 'presigned', cred]);
    const second = await callerOf(url);
    expect(await callerOf(url)).to.equal(second);
    expect(second).to.deep.equal(first);

    // The credential read anew (same secret): its own caller, naming it.
    cred = { ...cred };
    const renewed = await callerOf(url);
    expect(renewed).to.not.equal(second);
    expect(renewed.sigv4?.credential).to.equal(cred);
  });

  it("names the root only for the root's own key, scoped keys' callers carry their scope", async () => {
    cred = { username: 'strata', accessKey: 'AKROOT', secretKey: 'root-secret-0123456789' };
    const root = presign('AKROOT', cred.secretKey);
    await callerOf(root);
    expect((await callerOf(root)).isRoot).to.equal(true);
    cred = {
      username: 'strata',
      accessKey: 'AKSCOPED',
      secretKey: 'scoped-secret-0123456789',
      scope: { resources: [{ bucket: 'bkt', prefix: '' }] } as Credential['scope'],
    };
    const scoped = presign('AKSCOPED', cred.secretKey);
    await callerOf(scoped);
    const again = await callerOf(scoped);
    expect([again.isRoot, again.scope]).to.deep.equal([false, cred.scope]);
  });

  it("answers a kept URL at once from a credential cache in memory, with the full verification's refusals and callers", async () => {
    cred = { username: 'alice', accessKey: 'AKALICE', secretKey: 'alice-secret-0123456789' };
    const hits: boolean[] = [];
    const credentials = cachedCredentials(
      async () => cred,
      10_000,
      (hit) => hits.push(hit),
    );
    const quick = authenticate({ passport: {} as BearerAuthenticator, credentials, rootUser: 'strata', region: 'us-east-1', signatureV2: true });
    const outcome = (url: string, headers: Record<string, string> = {}) => {
      const req = { method: 'GET', url, headers: { host: '127.0.0.1:9000', ...headers } } as unknown as http.IncomingMessage;
      const res = {} as http.ServerResponse;
      state(res).operation = 'GetObject';
      let failed: unknown;
      const answer = quick(req, res, (err) => (failed = err));
      return { answer, caller: () => state(res).caller, failed: () => (failed instanceof S3Error ? failed.code : failed) };
    };
    const url = presign('AKALICE', cred.secretKey);
    const first = outcome(url);
    await first.answer;
    expect(first.failed()).to.equal(undefined);
    // Kept verdict, credential in memory: answered before any promise settles.
    const second = outcome(url);
    expect(second.answer).to.equal(undefined);
    expect([second.failed(), second.caller()?.username, second.caller()?.via]).to.deep.equal([undefined, 'alice', 'presigned']);
    expect(outcome(url).caller()).to.equal(second.caller());
    expect(hits).to.deep.equal([false, true, true]);
    // An unsigned x-amz-* header is refused there as the full verification refuses it.
    const unsigned = outcome(url, { 'x-amz-meta-added': '1' });
    expect([unsigned.answer, unsigned.failed()]).to.deep.equal([undefined, 'AccessDenied']);
    // Another secret now: verified whole, and the signature no longer holds.
    credentials.forget('AKALICE');
    cred = { ...cred, secretKey: 'rotated-secret-0123456789' };
    await outcome(url).answer;
    const rotated = outcome(url);
    await rotated.answer;
    expect(rotated.failed()).to.equal('SignatureDoesNotMatch');
  });
});
