import { expect } from 'chai';
import { Readable } from 'node:stream';
import { AwsChunkedDecoder, awsChunkedHeldBytes } from '../../images/gateway/src/auth/aws-chunked.js';
import { PayloadHashCheck } from '../../images/gateway/src/auth/payload-hash.js';
import {
  UNSIGNED_PAYLOAD,
  canonicalRequest,
  chunkStringToSign,
  presignUrl,
  sha256Hex,
  sign,
  signingKey,
  stringToSign,
} from '../../images/gateway/src/auth/sigv4.js';
import { verifySigV4, type Credential } from '../../images/gateway/src/auth/sigv4-verify.js';
import { VerifiedBody } from '../../images/gateway/src/s3/verified-body.js';
import { S3Error } from '../../images/object-model/src/index.js';

// The worked examples of the AWS S3 SigV4 documentation ("Examples: Signature Calculations").
const AK = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const EXAMPLE_TIME = new Date('2013-05-24T00:00:00Z');
const at = (now: Date) => ({ region: 'us-east-1', now });
const lookup = async (accessKey: string): Promise<Credential> => {
  if (accessKey !== AK) throw new S3Error('InvalidAccessKeyId');
  return { username: 'example', accessKey: AK, secretKey: SECRET };
};

async function failure(p: Promise<unknown>): Promise<S3Error> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(S3Error);
    return err as S3Error;
  }
  throw new Error('expected a rejection');
}

async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

describe('gateway SigV4', () => {
  const getObjectRequest = (signature: string, extra: Record<string, string> = {}) => ({
    method: 'GET',
    url: '/test.txt',
    headers: {
      host: 'examplebucket.s3.amazonaws.com',
      range: 'bytes=0-9',
      'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'x-amz-date': '20130524T000000Z',
      authorization: `AWS4-HMAC-SHA256 Credential=${AK}/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=${signature}`,
      ...extra,
    },
  });

  it('accepts the documented GetObject header signature', async () => {
    const r = await verifySigV4(getObjectRequest('f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41'), lookup, at(EXAMPLE_TIME));
    expect(r.credential.username).to.equal('example');
    expect(r.payload).to.deep.equal({ kind: 'sha256', hex: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' });
  });

  it('refuses a tampered header, a wrong signature, an unknown key and a skewed clock', async () => {
    const good = 'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41';
    expect((await failure(verifySigV4(getObjectRequest(good, { range: 'bytes=0-10' }), lookup, at(EXAMPLE_TIME)))).code).to.equal('SignatureDoesNotMatch');
    expect((await failure(verifySigV4(getObjectRequest('0'.repeat(64)), lookup, at(EXAMPLE_TIME)))).code).to.equal('SignatureDoesNotMatch');
    const unknown = getObjectRequest(good);
    unknown.headers.authorization = unknown.headers.authorization.replace(AK, 'NOPE');
    expect((await failure(verifySigV4(unknown, lookup, at(EXAMPLE_TIME)))).code).to.equal('InvalidAccessKeyId');
    const later = new Date(EXAMPLE_TIME.getTime() + 16 * 60 * 1000);
    const skew = await failure(verifySigV4(getObjectRequest(good), lookup, at(later)));
    expect(skew.code).to.equal('RequestTimeTooSkewed');
    expect(skew.status).to.equal(403);
  });

  it('accepts the documented presigned URL and refuses it once expired', async () => {
    const url =
      '/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';
    const req = { method: 'GET', url, headers: { host: 'examplebucket.s3.amazonaws.com' } };
    const r = await verifySigV4(req, lookup, at(new Date(EXAMPLE_TIME.getTime() + 3600_000)));
    expect(r.payload.kind).to.equal('unsigned');
    const expired = await failure(verifySigV4(req, lookup, at(new Date(EXAMPLE_TIME.getTime() + 86401_000))));
    expect(expired.code).to.equal('AccessDenied');
    expect(expired.message).to.equal('Request has expired');
    const tooLong = await failure(verifySigV4({ ...req, url: url.replace('X-Amz-Expires=86400', 'X-Amz-Expires=604801') }, lookup, at(EXAMPLE_TIME)));
    expect([tooLong.code, tooLong.status]).to.deep.equal(['AuthorizationQueryParametersError', 400]);
    for (const bad of ['-1', 'soon']) {
      const refused = await failure(verifySigV4({ ...req, url: url.replace('X-Amz-Expires=86400', `X-Amz-Expires=${bad}`) }, lookup, at(EXAMPLE_TIME)));
      expect([refused.code, refused.status], bad).to.deep.equal(['AuthorizationQueryParametersError', 400]);
    }
  });

  it('checks header signatures over the bytes sent: UTF-8 metadata as UTF-8, a Latin-1 byte as the character it is', async () => {
    const host = 'examplebucket.s3.amazonaws.com';
    const amzDate = '20130524T000000Z';
    const key = signingKey(SECRET, '20130524', 'us-east-1');
    for (const [text, sent] of [
      ['Grüße ✓ 日本', Buffer.from('Grüße ✓ 日本').toString('latin1')],
      ['café', 'café'],
    ]) {
      const signedHeaders = ['host', 'x-amz-content-sha256', 'x-amz-date', 'x-amz-meta-note'];
      const values = { host, 'x-amz-content-sha256': UNSIGNED_PAYLOAD, 'x-amz-date': amzDate, 'x-amz-meta-note': text };
      const canonical = canonicalRequest({ method: 'PUT', path: '/k', query: [], headers: values, signedHeaders, payloadHash: UNSIGNED_PAYLOAD });
      const signature = sign(key, stringToSign(amzDate, '20130524/us-east-1/s3/aws4_request', canonical));
      // As Node's HTTP server hands the header over: one character per byte received.
      const headers = {
        ...values,
        'x-amz-meta-note': sent,
        authorization: `AWS4-HMAC-SHA256 Credential=${AK}/20130524/us-east-1/s3/aws4_request,SignedHeaders=${signedHeaders.join(';')},Signature=${signature}`,
      };
      const r = await verifySigV4({ method: 'PUT', url: '/k', headers }, lookup, at(EXAMPLE_TIME));
      expect(r.credential.username, text).to.equal('example');
    }
  });

  describe('as AWS checks it', () => {
    const good = 'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41';
    const presigned =
      '/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';

    it('refuses x-amz-* headers the signature does not cover, with header and presigned auth', async () => {
      const viaHeader = await failure(verifySigV4(getObjectRequest(good, { 'x-amz-copy-source': '/other/secret.txt' }), lookup, at(EXAMPLE_TIME)));
      expect(viaHeader.code).to.equal('AccessDenied');
      expect(viaHeader.message).to.equal('There were headers present in the request which were not signed');
      expect(viaHeader.extra.HeadersNotSigned).to.equal('x-amz-copy-source');
      const req = {
        method: 'PUT',
        url: presigned,
        headers: { host: 'examplebucket.s3.amazonaws.com', 'x-amz-copy-source': '/other/secret.txt', 'x-amz-meta-a': '1' },
      };
      const viaQuery = await failure(verifySigV4(req, lookup, at(EXAMPLE_TIME)));
      expect(viaQuery.code).to.equal('AccessDenied');
      expect(viaQuery.extra.HeadersNotSigned).to.equal('x-amz-copy-source, x-amz-meta-a');
      // Headers outside x-amz-* may go unsigned (the documented request signs no user-agent).
      const r = await verifySigV4(getObjectRequest(good, { 'user-agent': 'curl', expect: '100-continue' }), lookup, at(EXAMPLE_TIME));
      expect(r.credential.username).to.equal('example');
    });

    it('checks the credential scope: the request day, this region, s3', async () => {
      const region = await failure(verifySigV4(getObjectRequest(good), lookup, { region: 'eu-west-1', now: EXAMPLE_TIME }));
      expect([region.code, region.status, region.extra.Region]).to.deep.equal(['AuthorizationHeaderMalformed', 400, 'eu-west-1']);
      expect(region.message).to.contain("the region 'us-east-1' is wrong; expecting 'eu-west-1'");
      const day = await failure(verifySigV4(getObjectRequest(good, { 'x-amz-date': '20130525T000000Z' }), lookup, at(new Date('2013-05-25T00:00:00Z'))));
      expect([day.code, day.status]).to.deep.equal(['AuthorizationHeaderMalformed', 400]);
      expect(day.message).to.contain('Invalid credential date');
      const service = getObjectRequest(good);
      service.headers.authorization = service.headers.authorization.replace('/s3/', '/sqs/');
      expect((await failure(verifySigV4(service, lookup, at(EXAMPLE_TIME)))).message).to.contain("incorrect service 'sqs'");
      const query = await failure(
        verifySigV4({ method: 'GET', url: presigned, headers: { host: 'examplebucket.s3.amazonaws.com' } }, lookup, { region: 'eu-west-1', now: EXAMPLE_TIME }),
      );
      expect([query.code, query.status, query.extra.Region]).to.deep.equal(['AuthorizationQueryParametersError', 400, 'eu-west-1']);
      const queryDay = await failure(
        verifySigV4(
          { method: 'GET', url: presigned.replace('X-Amz-Date=20130524', 'X-Amz-Date=20130523'), headers: { host: 'examplebucket.s3.amazonaws.com' } },
          lookup,
          at(EXAMPLE_TIME),
        ),
      );
      expect(queryDay.code).to.equal('AuthorizationQueryParametersError');
    });
  });

  it('presignUrl produces the documented URL and verifies round-trip', async () => {
    const url = presignUrl({
      method: 'GET',
      origin: 'https://examplebucket.s3.amazonaws.com',
      path: '/test.txt',
      accessKey: AK,
      secret: SECRET,
      region: 'us-east-1',
      expiresSeconds: 86400,
      now: EXAMPLE_TIME,
    });
    expect(url).to.contain('X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404');
    const odd = presignUrl({
      method: 'PUT',
      origin: 'http://127.0.0.1:9000',
      path: '/b/dir/a key+ü.txt',
      accessKey: AK,
      secret: SECRET,
      region: 'us-east-1',
      expiresSeconds: 60,
      now: EXAMPLE_TIME,
    });
    const u = new URL(odd);
    const r = await verifySigV4({ method: 'PUT', url: u.pathname + u.search, headers: { host: u.host } }, lookup, at(EXAMPLE_TIME));
    expect(r.credential.accessKey).to.equal(AK);
  });

  describe('aws-chunked bodies', () => {
    const seed = '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';
    const signing = {
      key: signingKey(SECRET, '20130524', 'us-east-1'),
      scope: '20130524/us-east-1/s3/aws4_request',
      amzDate: '20130524T000000Z',
      seedSignature: seed,
    };
    const body = (lastSig = 'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9') =>
      Buffer.concat([
        Buffer.from('10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n'),
        Buffer.alloc(65536, 'a'),
        Buffer.from('\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n'),
        Buffer.alloc(1024, 'a'),
        Buffer.from(`\r\n0;chunk-signature=${lastSig}\r\n\r\n`),
      ]);

    it('decodes the documented example, verifying every chunk signature, in any split', async () => {
      const whole = body();
      // Feed it in awkward 7-byte pieces to exercise framing across boundaries.
      const pieces: Buffer[] = [];
      for (let i = 0; i < whole.length; i += 7) pieces.push(whole.subarray(i, i + 7));
      const out = await collect(Readable.from(pieces).pipe(new AwsChunkedDecoder(signing)));
      expect(out.length).to.equal(66560);
      expect(sha256Hex(out)).to.equal(sha256Hex(Buffer.alloc(66560, 'a')));
    });

    it('fails on a forged final signature without passing the last chunk on', async () => {
      const decoder = new AwsChunkedDecoder(signing);
      const received: Buffer[] = [];
      decoder.on('data', (c: Buffer) => received.push(c));
      const err = await new Promise<Error>((resolve) => {
        decoder.on('error', resolve);
        decoder.end(body('0'.repeat(64)));
      });
      expect((err as S3Error).code).to.equal('SignatureDoesNotMatch');
      expect(Buffer.concat(received).length).to.be.lessThan(66560);
    });

    describe('memory: a chunk streams through, never held whole', () => {
      const PIECE = 64 * 1024;
      /** Signed chunks of the given data, the empty final chunk, each signature chained on the previous one; `forge` breaks one. */
      const framed = (datas: Buffer[], forge?: number) => {
        let previous = seed;
        const parts: Buffer[] = [];
        for (const [i, data] of [...datas, Buffer.alloc(0)].entries()) {
          previous = sign(signing.key, chunkStringToSign(signing.amzDate, signing.scope, previous, sha256Hex(data)));
          const signature = i === forge ? '0'.repeat(64) : previous;
          parts.push(Buffer.from(`${data.length.toString(16)};chunk-signature=${signature}\r\n`), data, Buffer.from('\r\n'));
        }
        return Buffer.concat(parts);
      };
      /** Feed the body in network-sized pieces to a consumer, noting the most ever held back unverified. */
      const feed = async (body: Buffer, declaredLength?: number) => {
        const decoder = new AwsChunkedDecoder(signing, declaredLength);
        let received = 0;
        let maxHeld = 0;
        decoder.on('data', (c: Buffer) => (received += c.length));
        const error = await new Promise<S3Error | undefined>((resolve) => {
          decoder.on('error', (e) => resolve(e as S3Error));
          decoder.on('end', () => resolve(undefined));
          void (async () => {
            for (let i = 0; i < body.length && !decoder.destroyed; i += PIECE) {
              if (!decoder.write(body.subarray(i, i + PIECE))) await new Promise((r) => decoder.once('drain', r));
              maxHeld = Math.max(maxHeld, decoder.heldBytes, awsChunkedHeldBytes());
            }
            if (!decoder.destroyed) decoder.end();
          })();
        });
        return { error, received, maxHeld };
      };

      it('holds back at most one network read of an 8 MiB chunk, and passes the whole body once verified', async () => {
        const data = Buffer.alloc(8 * 1024 * 1024, 'x');
        const ok = await feed(framed([data]), data.length);
        expect(ok.error).to.equal(undefined);
        expect(ok.received).to.equal(data.length);
        expect(ok.maxHeld).to.be.at.most(PIECE);
        expect(awsChunkedHeldBytes()).to.equal(0);
      });

      it('a forged chunk signature fails the stream before the body is complete; nothing stays held', async () => {
        const datas = [Buffer.alloc(1024 * 1024, 'a'), Buffer.alloc(1024 * 1024, 'b')];
        for (const forge of [0, 1, 2]) {
          const bad = await feed(framed(datas, forge), 2 * 1024 * 1024);
          expect(bad.error?.code, String(forge)).to.equal('SignatureDoesNotMatch');
          expect(bad.received).to.be.lessThan(2 * 1024 * 1024);
          expect(awsChunkedHeldBytes()).to.equal(0);
        }
      });

      it('refuses data past x-amz-decoded-content-length before the declared length is passed on', async () => {
        const data = Buffer.alloc(1024 * 1024, 'c');
        const long = await feed(framed([data]), data.length - 10);
        expect(long.error?.code).to.equal('InvalidRequest');
        expect(long.received).to.be.lessThan(data.length - 10);
      });
    });

    describe('signed trailers (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)', () => {
      const withTrailer = { ...signing, trailer: true };
      /** hello / world chunks, the final chunk, then the trailers and their signature as a client signs them. */
      const signedBody = (opts: { checksum?: string; signedChecksum?: string; signature?: boolean; closingLine?: boolean } = {}) => {
        let previous = seed;
        const parts: string[] = [];
        for (const data of ['hello', ' world', '']) {
          previous = sign(signing.key, chunkStringToSign(signing.amzDate, signing.scope, previous, sha256Hex(data)));
          parts.push(`${data.length.toString(16)};chunk-signature=${previous}\r\n${data}${data ? '\r\n' : ''}`);
        }
        const signedChecksum = opts.signedChecksum ?? 'DUoRhQ==';
        // Written out here rather than through the decoder's helper: the documented string to sign.
        const toSign = ['AWS4-HMAC-SHA256-TRAILER', signing.amzDate, signing.scope, previous, sha256Hex(`x-amz-checksum-crc32:${signedChecksum}\n`)].join('\n');
        parts.push(`x-amz-checksum-crc32:${opts.checksum ?? signedChecksum}\r\n`);
        if (opts.signature !== false) parts.push(`x-amz-trailer-signature:${sign(signing.key, toSign)}\r\n`);
        if (opts.closingLine !== false) parts.push('\r\n');
        return Buffer.from(parts.join(''));
      };
      const decode = async (body: Buffer) => {
        const decoder = new AwsChunkedDecoder(withTrailer);
        const received: Buffer[] = [];
        decoder.on('data', (c: Buffer) => received.push(c));
        const error = await new Promise<Error | undefined>((resolve) => {
          decoder.on('error', resolve);
          decoder.on('end', () => resolve(undefined));
          for (let i = 0; i < body.length; i += 5) decoder.write(body.subarray(i, i + 5));
          decoder.end();
        });
        return { error: error as S3Error | undefined, text: Buffer.concat(received).toString(), trailers: decoder.trailers };
      };

      it('passes the body on once the trailer signature holds (with or without the closing empty line)', async () => {
        for (const closingLine of [true, false]) {
          const ok = await decode(signedBody({ closingLine }));
          expect(ok.error, String(closingLine)).to.equal(undefined);
          expect(ok.text).to.equal('hello world');
          expect(ok.trailers['x-amz-checksum-crc32']).to.equal('DUoRhQ==');
        }
      });

      it('refuses a trailer changed after signing, or one without a signature, and withholds the last chunk', async () => {
        for (const body of [signedBody({ checksum: 'AAAAAA==' }), signedBody({ checksum: 'AAAAAA==', closingLine: false }), signedBody({ signature: false })]) {
          const failed = await decode(body);
          expect(failed.error?.code).to.equal('SignatureDoesNotMatch');
          expect(failed.text.length).to.be.lessThan('hello world'.length);
        }
      });
    });

    it('decodes unsigned chunks with trailers, and reports a truncated body', async () => {
      const framed = Buffer.from('5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n');
      const decoder = new AwsChunkedDecoder(undefined);
      expect((await collect(Readable.from([framed]).pipe(decoder))).toString()).to.equal('hello world');
      expect(decoder.trailers['x-amz-checksum-crc32']).to.equal('AAAAAA==');
      const truncated = new AwsChunkedDecoder(undefined);
      const err = await new Promise<Error>((resolve) => {
        truncated.on('error', resolve);
        truncated.resume();
        truncated.end(Buffer.from('5\r\nhel'));
      });
      expect((err as S3Error).code).to.equal('IncompleteBody');
    });
  });

  it('a payload hash check passes a matching body and withholds the end of a mismatching one', async () => {
    const data = Buffer.from('strata object bytes');
    expect(
      (await collect(Readable.from([data.subarray(0, 5), data.subarray(5)]).pipe(new VerifiedBody([new PayloadHashCheck(sha256Hex(data))])))).equals(data),
    ).to.equal(true);
    const verifier = new VerifiedBody([new PayloadHashCheck(sha256Hex('something else'))]);
    const received: Buffer[] = [];
    verifier.on('data', (c: Buffer) => received.push(c));
    const err = await new Promise<Error>((resolve) => {
      verifier.on('error', resolve);
      verifier.write(data.subarray(0, 5));
      verifier.end(data.subarray(5));
    });
    expect((err as S3Error).code).to.equal('BadDigest');
    expect(Buffer.concat(received).length).to.be.lessThan(data.length);
  });
});
