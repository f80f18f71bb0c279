import { sendRaw, signedPostFields, signRaw, UNSIGNED_PAYLOAD, type RawRequest } from './raw-http.js';
import { send, type FuzzContext, type Rng } from './fuzz-cases.js';

/** The fault-and-fuzz suite's generator for answer delivery (fuzz-cases.ts draws it by weight). */

/**
 * What once got a reset, a 500 or no answer at all: a PUT followed on its connection by bytes that are no
 * request (its own answer must come first, and say whether it stored), large bodies refused before they are
 * read, a form cut before its final boundary, a ?restore document with a comment, POSTs to a bucket name.
 */
export async function delivery(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const key = `deliver-${n}`;
  const target = `/${ctx.attackerBucket}/${key}`;
  switch (rng.int(0, 4)) {
    case 0: {
      const body = rng.bytes(rng.int(0, 70_000));
      const put = signRaw({ method: 'PUT', target, headers: [['content-length', String(body.length)]], body }, ctx.host, ctx.attacker);
      const garbage = rng.pick(['GARBAGE\u0001\r\n\r\n', 'GET / HTTP/9.9\r\n\r\n', '\r\n\r\n\u0000\u0000', 'PUT /x HTTP/1.1\r\ncontent-length: -1\r\n\r\n']);
      // The PUT keeps its connection open: the garbage that follows its body is the connection's next request.
      const outcome = await sendRaw(ctx.port, { ...put, body: Buffer.concat([body, Buffer.from(garbage, 'latin1')]), keepAlive: true }, ctx.deadlineMs);
      ctx.record({ category: 'pipelined', label: `PUT + ${JSON.stringify(garbage.slice(0, 12))}`, outcome });
      // Its answer is its own: 200 means stored, anything else means nothing stored.
      if (outcome.kind === 'answered' && outcome.status === 200) ctx.mustExist.add(key);
      else ctx.mustNotExist.add(key);
      return;
    }
    case 1: {
      const size = rng.pick([1_000_000, 8_000_000]);
      const signed = rng.chance(0.5);
      const base: RawRequest = { method: 'PUT', target, headers: [['content-length', String(size)]] };
      const req = signed
        ? signRaw(base, ctx.host, { accessKey: ctx.attacker.accessKey, secret: 'not-the-secret-0123456789' }, { payloadHash: UNSIGNED_PAYLOAD })
        : { ...base, headers: [...base.headers, ['host', ctx.host] as [string, string]] };
      ctx.mustNotExist.add(key);
      await send(ctx, 'refused-body', `${signed ? 'bad signature' : 'anonymous'} ${size}`, { ...req, body: Buffer.alloc(size, 0x61) });
      return;
    }
    case 2: {
      const boundary = `fz${rng.int(0, 1e9)}`;
      const fields = { key, ...signedPostFields(ctx.attackerBucket, ctx.attacker) };
      const parts = Object.entries(fields).map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
      const file = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n${rng.bytes(rng.int(0, 5000)).toString('hex')}`;
      const end = rng.pick(['\r\n', '', `\r\n--${boundary}`, '\r\n--']);
      const body = Buffer.from(parts.join('') + file + end);
      const req: RawRequest = {
        method: 'POST',
        target: `/${ctx.attackerBucket}`,
        headers: [
          ['host', ctx.host],
          ['content-type', `multipart/form-data; boundary=${boundary}`],
          ['content-length', String(body.length)],
        ],
        body,
      };
      ctx.mustNotExist.add(key);
      await send(ctx, 'form-cut', `no final boundary, ends ${JSON.stringify(end)}`, req);
      return;
    }
    case 3: {
      const doc = Buffer.from(
        rng.pick(['<RestoreRequest><!-- c --><Days>1</Days></RestoreRequest>', '<RestoreRequest><Days>1</Days><!-- --></RestoreRequest>', '']),
      );
      const req = signRaw(
        { method: 'POST', target: `${target}?restore`, headers: [['content-length', String(doc.length)]], body: doc },
        ctx.host,
        ctx.attacker,
      );
      await send(ctx, 'signed', `restore ${doc.length}`, req);
      return;
    }
    default: {
      const bucket = rng.pick([ctx.attackerBucket, 'no-such-bucket-fz', ctx.victimBucket]);
      const type = rng.pick([
        'application/octet-stream',
        'text/plain',
        'multipart/form-data',
        'multipart/form-data; boundary=',
        'application/x-www-form-urlencoded',
        '',
      ]);
      const body = rng.bytes(rng.int(0, 3000));
      const headers: Array<[string, string]> = [['content-length', String(body.length)]];
      if (type) headers.push(['content-type', type]);
      const req = signRaw(
        { method: 'POST', target: `/${bucket}${rng.pick(['', '?mdsearch', '?inventory', '?mdsearch&inventory'])}`, headers, body },
        ctx.host,
        ctx.attacker,
      );
      await send(ctx, 'signed', `POST bucket ${type}`, req);
    }
  }
}
