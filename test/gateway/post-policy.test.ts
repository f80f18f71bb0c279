import { expect } from 'chai';
import { verifyPostPolicy } from '../../images/gateway/src/auth/post-policy.js';
import { createHmac } from 'node:crypto';
import { sign, signingKey } from '../../images/gateway/src/auth/sigv4.js';
import { S3Error } from '../../images/object-model/src/index.js';

const SECRET = 'post-policy-secret';
const lookup = async (accessKey: string) => {
  if (accessKey !== 'AK') throw new S3Error('InvalidAccessKeyId');
  return { username: 'alice', accessKey, secretKey: SECRET };
};
const NOW = new Date('2026-11-26T12:00:00Z');

/** A form signed as createPresignedPost signs one: the policy (base64) HMAC'd with the SigV4 key. */
function form(conditions: unknown[], fields: Record<string, string> = {}, expiration = '2026-11-26T13:00:00Z'): Map<string, string> {
  const base = { 'x-amz-algorithm': 'AWS4-HMAC-SHA256', 'x-amz-credential': 'AK/20261126/us-east-1/s3/aws4_request', 'x-amz-date': '20261126T115900Z' };
  const signed = [...conditions, ...Object.entries(base).map(([k, v]) => ({ [k]: v }))];
  const policy = Buffer.from(JSON.stringify({ expiration, conditions: signed })).toString('base64');
  return new Map(Object.entries({ ...base, ...fields, policy, 'x-amz-signature': sign(signingKey(SECRET, '20261126', 'us-east-1'), policy) }));
}

/** A form signed as SigV2 clients (boto2, s3-tests) sign one: base64(HMAC-SHA1(secret, policy)), written here from the S3 documentation. */
function formV2(conditions: unknown[], fields: Record<string, string> = {}, expiration = '2026-11-26T13:00:00Z', secret = SECRET): Map<string, string> {
  const policy = Buffer.from(JSON.stringify({ expiration, conditions })).toString('base64');
  const signature = createHmac('sha1', secret).update(policy).digest('base64');
  return new Map(Object.entries({ awsaccesskeyid: 'AK', ...fields, policy, signature }));
}

async function outcome(fields: Map<string, string>, bucket = 'photos', signatureV2 = true): Promise<string> {
  try {
    const r = await verifyPostPolicy(fields, bucket, lookup, 'us-east-1', { signatureV2, now: NOW });
    return `ok ${r.credential.username}${r.sizeRange ? ` ${r.sizeRange.min}-${r.sizeRange.max}` : ''}`;
  } catch (err) {
    if (err instanceof S3Error) return `${err.code}: ${err.message}`;
    throw err;
  }
}

describe('gateway: POST policy (browser form uploads)', () => {
  it('accepts the three condition forms, field names in any case, x-ignore- fields, and reports the size range', async () => {
    const fields = form(
      [{ bucket: 'photos' }, ['starts-with', '$key', 'user/alice/'], ['eq', '$Content-Type', 'image/png'], ['content-length-range', 1, 1048576]],
      { key: 'user/alice/a.png', 'content-type': 'image/png', 'x-ignore-tracking': '1' },
    );
    expect(await outcome(fields)).to.equal('ok alice 1-1048576');
  });

  it('refuses what does not hold, naming the failed condition or the extra field', async () => {
    const cases: Array<[Map<string, string>, RegExp, string?]> = [
      [form([{ bucket: 'photos' }, { key: 'a' }], { key: 'a' }), /^AccessDenied: .*Condition failed: \["eq", "\$bucket", "photos"\]/, 'videos'],
      [form([['starts-with', '$key', 'user/alice/']], { key: 'user/bob/a' }), /^AccessDenied: .*Condition failed: \["starts-with", "\$key", "user\/alice\/"\]/],
      [form([{ key: 'a' }], { key: 'a', 'x-amz-meta-sneaky': 'x' }), /^AccessDenied: .*Extra input fields: x-amz-meta-sneaky/],
      [form([{ key: 'a' }], { key: 'a' }, '2026-11-26T11:00:00Z'), /^AccessDenied: Invalid according to Policy: Policy expired\./],
      [form([{ key: 'a' }], { key: 'a' }, 'tomorrow'), /^InvalidPolicyDocument: /],
      // Python's str(datetime): a date Date.parse takes, not ISO 8601 (what S3 requires).
      [form([{ key: 'a' }], { key: 'a' }, '2026-11-26 13:00:00.123456+00:00'), /^InvalidPolicyDocument: .*ISO 8601/],
      [form([['content-length-range', 10, 1]], { key: 'a' }), /^InvalidPolicyDocument: .*Invalid condition/],
      [form([['matches', '$key', 'a.*']], { key: 'a' }), /^InvalidPolicyDocument: .*Invalid condition/],
      [form([{ key: 'a', acl: 'private' }], { key: 'a' }), /^InvalidPolicyDocument: .*Invalid condition/],
    ];
    for (const [fields, expected, bucket] of cases) expect(await outcome(fields, bucket), String(expected)).to.match(expected);
  });

  it('refuses a policy or signature that was changed, other keys, another region, and a form without its policy', async () => {
    const good = form([{ key: 'a' }], { key: 'a' });
    const tampered = new Map(good).set('policy', Buffer.from('{"expiration":"2099-01-01T00:00:00Z","conditions":[]}').toString('base64'));
    expect(await outcome(tampered)).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(new Map(good).set('x-amz-signature', '0'.repeat(64)))).to.match(/^SignatureDoesNotMatch/);
    expect(await outcome(new Map(good).set('x-amz-credential', 'NOPE/20261126/us-east-1/s3/aws4_request'))).to.match(/^InvalidAccessKeyId/);
    expect(await outcome(new Map(good).set('x-amz-credential', 'AK/20261126/eu-west-1/s3/aws4_request'))).to.match(/^InvalidArgument: .*us-east-1/);
    expect(await outcome(new Map(good).set('x-amz-date', '20261125T115900Z'))).to.match(/^InvalidArgument: x-amz-date/);
    const notJson = Buffer.from('{"expiration": ').toString('base64');
    const signedNotJson = new Map(good).set('policy', notJson).set('x-amz-signature', sign(signingKey(SECRET, '20261126', 'us-east-1'), notJson));
    expect(await outcome(signedNotJson)).to.equal('InvalidPolicyDocument: Invalid Policy: Invalid JSON.');
    // (A form with no credential at all is anonymous: the handler never asks for its policy.)
    const noPolicy = new Map(good);
    noPolicy.delete('policy');
    expect(await outcome(noPolicy)).to.match(/^AccessDenied: A signed form needs its policy/);
  });

  describe('signed with Signature Version 2 (AWSAccessKeyId, signature)', () => {
    const conditions = [
      { bucket: 'photos' },
      ['starts-with', '$key', 'foo'],
      { acl: 'private' },
      ['starts-with', '$Content-Type', 'text/plain'],
      ['content-length-range', 0, 1024],
    ];
    const fields = { key: 'foo.txt', acl: 'private', 'content-type': 'text/plain' };

    it("accepts s3-tests' form: the same conditions as SigV4, AWSAccessKeyId and signature need none", async () => {
      expect(await outcome(formV2(conditions, fields))).to.equal('ok alice 0-1024');
    });

    it('checks the policy as for SigV4: conditions, extra fields, expiry', async () => {
      expect(await outcome(formV2(conditions, { ...fields, key: 'bar.txt' }))).to.match(/^AccessDenied: .*Condition failed: \["starts-with", "\$key", "foo"\]/);
      expect(await outcome(formV2(conditions, { ...fields, 'x-amz-meta-sneaky': 'x' }))).to.match(/^AccessDenied: .*Extra input fields: x-amz-meta-sneaky/);
      expect(await outcome(formV2(conditions, fields, '2026-11-26T11:00:00Z'))).to.match(/^AccessDenied: Invalid according to Policy: Policy expired\./);
      expect(await outcome(formV2([['content-length-range', 0, 1024]], { key: 'a' }, 'tomorrow'))).to.match(/^InvalidPolicyDocument: /);
    });

    it('refuses a wrong signature (SignatureDoesNotMatch with the policy as the string signed), an unknown key, a missing signature or policy', async () => {
      const wrong = formV2(conditions, fields, undefined, 'another-secret');
      const err = await verifyPostPolicy(wrong, 'photos', lookup, 'us-east-1', { signatureV2: true, now: NOW }).then(
        () => undefined,
        (e: S3Error) => e,
      );
      expect([err?.code, err?.status, err?.extra.StringToSign, err?.extra.AWSAccessKeyId]).to.deep.equal([
        'SignatureDoesNotMatch',
        403,
        wrong.get('policy'),
        'AK',
      ]);
      const tampered = new Map(formV2(conditions, fields)).set('policy', formV2([], fields).get('policy')!);
      expect(await outcome(tampered)).to.match(/^SignatureDoesNotMatch/);
      expect(await outcome(new Map(formV2(conditions, fields)).set('awsaccesskeyid', 'NOPE'))).to.match(/^InvalidAccessKeyId/);
      const unsigned = formV2(conditions, fields);
      unsigned.delete('signature');
      expect(await outcome(unsigned)).to.match(/^InvalidArgument: .*'Signature'/);
      const noPolicy = formV2(conditions, fields);
      noPolicy.delete('policy');
      expect(await outcome(noPolicy)).to.match(/^InvalidArgument: .*'policy'/);
    });

    it('refuses a form that mixes SigV2 and SigV4 fields, and every SigV2 form when SigV2 is turned off', async () => {
      const mixed = new Map(formV2(conditions, fields)).set('x-amz-credential', 'AK/20261126/us-east-1/s3/aws4_request');
      expect(await outcome(mixed)).to.match(/^InvalidArgument: Only one auth mechanism allowed/);
      expect(await outcome(formV2(conditions, fields), 'photos', false)).to.match(/^AccessDenied: AWS Signature Version 2 is turned off .*STRATA_SIGV2=false/);
      // SigV4 forms are not concerned by the switch.
      expect(await outcome(form([{ key: 'a' }], { key: 'a' }), 'photos', false)).to.equal('ok alice');
    });
  });
});
