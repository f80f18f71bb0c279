import { createHash, randomBytes } from 'node:crypto';
import { mulberry32 } from '../../../images/service-kit/src/random.js';
import { delivery } from './fuzz-delivery.js';
import { sendRaw, signRaw, UNSIGNED_PAYLOAD, type Credentials, type RawOutcome, type RawRequest } from './raw-http.js';

/**
 * The fault-and-fuzz suite's request generators: every case is drawn from one seeded generator, so a
 * failing run is replayed by its seed. Each case sends one or more raw requests and records what came
 * back; writes that must be refused name the key that must not exist afterwards.
 */

/** mulberry32: small, fast, good enough to draw test cases from a seed. */
export function seededRandom(seed: number): Rng {
  const next = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return {
    next,
    int,
    pick: <T>(items: readonly T[]): T => items[int(0, items.length - 1)]!,
    chance: (p: number) => next() < p,
    bytes: (n: number) => {
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = int(0, 255);
      return b;
    },
  };
}

export interface Rng {
  next(): number;
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  bytes(n: number): Buffer;
}

export interface FuzzRecord {
  category: string;
  label: string;
  outcome: RawOutcome;
}

export interface FuzzContext {
  port: number;
  host: string;
  /** The fuzzing tenant and its own bucket. */
  attacker: Credentials;
  attackerBucket: string;
  /** Another tenant, whose bucket and objects must come through untouched. */
  victim: Credentials;
  victimBucket: string;
  victimKeys: string[];
  /** Keys of the attacker's bucket that a refused write named: none may exist at the end. */
  mustNotExist: Set<string>;
  /** Keys of the attacker's bucket that a write answered 200 stored: each must exist at the end. */
  mustExist: Set<string>;
  record(r: FuzzRecord): void;
  deadlineMs: number;
}

const md5Base64 = (b: Buffer) => createHash('md5').update(b).digest('base64');
const enc = (s: string) => encodeURIComponent(s);

/** Raw (already encoded) key material: plain, unicode, and the bytes the edge must refuse. */
const BAD_KEY_BYTES = ['%00', '%FF', '%C0%AF', '%ED%A0%80', '%E2%82', '%F8%88%80%80%80'];
function rawKey(rng: Rng, n: number): { raw: string; bad: boolean } {
  switch (rng.int(0, 7)) {
    case 0:
      return { raw: `plain-${n}.txt`, bad: false };
    case 1:
      return { raw: enc(`ünïcødé/文字-${n}`), bad: false };
    case 2:
      return { raw: `k${n}${rng.pick(BAD_KEY_BYTES)}x`, bad: true };
    case 3:
      return { raw: `dir/${rng.pick(BAD_KEY_BYTES)}${rng.pick(BAD_KEY_BYTES)}/${n}`, bad: true };
    case 4:
      return { raw: `${'k'.repeat(rng.int(1000, 1100))}${n}`, bad: false };
    case 5:
      return { raw: rng.pick(['a/../b', '%2E%2E/x', 'a//b', 'trailing/', ' sp ace', '%20', '..', '.']) + n, bad: false };
    case 6:
      return { raw: enc(`q?x=1&y#frag;${n}`), bad: false };
    default:
      return { raw: `n-${n}-${rng.int(0, 1e9)}`, bad: false };
  }
}

const FUZZ_VALUES = [
  '%00',
  '%FF',
  'abc',
  '-1',
  '0',
  '99999999999999999999',
  '',
  '%0D%0Aset-cookie:x',
  '%C3%28',
  'a'.repeat(2000),
  '%E2%80%AE',
  'attachment%3B%20filename%3D%22%E2%80%AEtxt.exe%22',
  'fz/%26%230%3B',
  'null',
];

function fuzzValue(rng: Rng): string {
  return rng.chance(0.7) ? rng.pick(FUZZ_VALUES) : Buffer.from(rng.bytes(rng.int(1, 12))).toString('hex');
}

/** Header values a client could send: printable junk, long values, high bytes (latin1 on the wire). */
function headerJunk(rng: Rng): string {
  return rng.pick([
    '',
    'x'.repeat(rng.int(1, 9000)),
    '\u00ff\u00fe',
    'bytes=999-1',
    'bytes=-0',
    'bytes=5-3,a-b',
    '"etag"',
    '*',
    'W/"x"',
    'not-a-date',
    'aGVsbG8=',
    '🚀'.slice(0, 1),
  ]);
}

const LIST_PARAMS = [
  'prefix',
  'delimiter',
  'start-after',
  'continuation-token',
  'marker',
  'max-keys',
  'encoding-type',
  'fetch-owner',
  'key-marker',
  'upload-id-marker',
  'max-uploads',
  'version-id-marker',
];
const SUBRESOURCES = [
  '',
  'list-type=2',
  'uploads',
  'versions',
  'acl',
  'tagging',
  'versioning',
  'policy',
  'object-lock',
  'cors',
  'lifecycle',
  'location',
  'website',
  'replication',
  'notification',
  'logging',
  'encryption',
  'attributes',
  'restore',
  'torrent',
  'select&select-type=2',
  'mdsearch&inventory',
];
const OBJECT_HEADERS = [
  'x-amz-meta-a',
  'x-amz-meta-b',
  'range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'x-amz-tagging',
  'x-amz-storage-class',
  'x-amz-acl',
  'cache-control',
  'content-disposition',
  'content-encoding',
  'x-amz-checksum-crc32',
  'x-amz-checksum-sha256',
  'x-amz-website-redirect-location',
  'x-amz-server-side-encryption',
  'x-amz-copy-source',
  'x-amz-copy-source-range',
  'x-amz-metadata-directive',
  'expect',
  'content-md5',
];

export async function send(ctx: FuzzContext, category: string, label: string, req: RawRequest): Promise<RawOutcome> {
  const outcome = await sendRaw(ctx.port, req, ctx.deadlineMs);
  ctx.record({ category, label, outcome });
  return outcome;
}

/** Correctly signed requests with fuzzed keys, query parameters, headers and bodies. */
async function signedFuzz(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const { raw, bad } = rawKey(rng, n);
  const bucket = rng.chance(0.9) ? ctx.attackerBucket : rng.pick([ctx.victimBucket, 'no-such-bucket-fz', 'UPPER', 'a', `${ctx.attackerBucket}%00`]);
  const onBucket = rng.chance(0.35);
  const method = onBucket ? rng.pick(['GET', 'GET', 'HEAD', 'PUT', 'DELETE', 'POST']) : rng.pick(['GET', 'HEAD', 'PUT', 'PUT', 'DELETE', 'POST', 'OPTIONS']);
  const query: string[] = [];
  if (rng.chance(0.6)) query.push(rng.pick(SUBRESOURCES));
  for (let i = rng.int(0, 3); i > 0; i--) query.push(`${rng.pick(LIST_PARAMS)}=${fuzzValue(rng)}`);
  if (!onBucket && rng.chance(0.3)) query.push(`response-${rng.pick(['cache-control', 'content-type', 'content-disposition', 'expires'])}=${fuzzValue(rng)}`);
  if (!onBucket && rng.chance(0.15)) query.push(`partNumber=${rng.pick(['1', '0', '10001', 'x', '-3'])}`);
  const headers: Array<[string, string]> = [];
  for (let i = rng.int(0, 3); i > 0; i--) {
    const name = rng.pick(OBJECT_HEADERS);
    headers.push([name, name === 'x-amz-copy-source' && rng.chance(0.5) ? `/${ctx.victimBucket}/${rng.pick(ctx.victimKeys)}` : headerJunk(rng)]);
  }
  const body = method === 'PUT' || method === 'POST' ? rng.bytes(rng.pick([0, 1, 100, 4096, 70_000])) : Buffer.alloc(0);
  if (body.length || method === 'PUT' || method === 'POST') headers.push(['content-length', String(body.length)]);
  const path = onBucket ? `/${bucket}` : `/${bucket}/${raw}`;
  const target = query.length ? `${path}?${query.filter(Boolean).join('&')}` : path;
  const req = signRaw({ method, target, headers, body }, ctx.host, ctx.attacker, { payloadHash: rng.chance(0.5) ? UNSIGNED_PAYLOAD : undefined });
  // A write of a key the edge must refuse (bytes that are not UTF-8, NUL, controls) must not store anything.
  if (!onBucket && bad && bucket === ctx.attackerBucket && method === 'PUT') ctx.mustNotExist.add(raw);
  await send(ctx, 'signed', `${method} ${target.slice(0, 120)}`, req);
}

/** Writes to the other tenant's objects with every kind of wrong or missing authentication. */
async function authAttack(rng: Rng, ctx: FuzzContext): Promise<void> {
  const key = rng.chance(0.7) ? rng.pick(ctx.victimKeys) : `planted-${rng.int(0, 1e9)}`;
  const target = `/${ctx.victimBucket}/${enc(key)}`;
  const body = rng.bytes(rng.int(0, 2048));
  const variant = rng.int(0, 9);
  // A DELETE reads no body: only a write can show a payload hash that lies.
  const method = variant === 4 || variant === 8 ? 'PUT' : rng.pick(['PUT', 'DELETE', 'POST']);
  const base: RawRequest = { method, target, headers: [['content-length', String(body.length)]], body };
  const now = new Date();
  const variants: Array<[string, () => RawRequest]> = [
    ['no auth', () => ({ ...base, headers: [...base.headers, ['host', ctx.host]] })],
    ['bearer junk', () => ({ ...base, headers: [...base.headers, ['host', ctx.host], ['authorization', `Bearer ${rng.bytes(30).toString('base64')}`]] })],
    ['other tenant signs', () => signRaw(base, ctx.host, ctx.attacker)],
    ['wrong secret', () => signRaw(base, ctx.host, { accessKey: ctx.victim.accessKey, secret: 'not-the-secret-0123456789' })],
    ['payload hash lies', () => signRaw(base, ctx.host, ctx.victim, { payloadHash: createHash('sha256').update('other').digest('hex') })],
    ['old date', () => signRaw(base, ctx.host, ctx.victim, { now: new Date(now.getTime() - 3 * 3600_000) })],
    ['other region', () => signRaw(base, ctx.host, ctx.victim, { region: 'eu-west-1' })],
    [
      'header added after signing',
      () => {
        const signed = signRaw(base, ctx.host, ctx.victim);
        return { ...signed, headers: [...signed.headers, ['x-amz-meta-smuggled', '1']] };
      },
    ],
    [
      'body swapped after signing',
      () => {
        const signed = signRaw(base, ctx.host, ctx.victim);
        return { ...signed, body: Buffer.from(rng.bytes(body.length)) };
      },
    ],
    ['garbage authorization', () => ({ ...base, headers: [...base.headers, ['host', ctx.host], ['authorization', `AWS4-HMAC-SHA256 ${fuzzValue(rng)}`]] })],
  ];
  const [label, make] = variants[variant]!;
  // A DELETE reads no body: only a write of the body can show a payload hash that lies.
  const req = make();
  await send(ctx, 'auth', `${label} ${req.method}`, req);
}

/** Signed uploads whose body stops part-way: the client goes away (cut) or keeps the socket and sends no more. */
async function cutBody(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const key = `cut-${n}`;
  const declared = rng.pick([10, 1000, 65_536, 1_000_000, 10_000_000]);
  const sent = rng.int(0, Math.min(declared - 1, 256 * 1024));
  const body = rng.bytes(sent);
  const chunked = rng.chance(0.3);
  const headers: Array<[string, string]> = chunked ? [['transfer-encoding', 'chunked']] : [['content-length', String(declared)]];
  const wire = chunked ? Buffer.concat([Buffer.from(`${declared.toString(16)}\r\n`), body]) : body;
  const req = signRaw({ method: 'PUT', target: `/${ctx.attackerBucket}/${key}`, headers, body: wire, cutAfter: wire.length }, ctx.host, ctx.attacker, {
    payloadHash: UNSIGNED_PAYLOAD,
  });
  ctx.mustNotExist.add(key);
  await send(ctx, 'cut', `${chunked ? 'chunked' : 'length'} ${sent}/${declared}`, req);
}

/** Broken HTTP and aws-chunked framing; complete requests the server must refuse. */
async function badFraming(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const key = `frame-${n}`;
  const target = `/${ctx.attackerBucket}/${key}`;
  const data = rng.bytes(rng.int(1, 3000));
  const sig = 'a'.repeat(64);
  const cases: Array<[string, Array<[string, string]>, Buffer, string]> = [
    ['bad chunk size', [['transfer-encoding', 'chunked']], Buffer.from(`zz\r\n${data.toString('hex')}\r\n0\r\n\r\n`), UNSIGNED_PAYLOAD],
    [
      'te and cl',
      [
        ['transfer-encoding', 'chunked'],
        ['content-length', '5'],
      ],
      Buffer.from('5\r\nhello\r\n0\r\n\r\n'),
      UNSIGNED_PAYLOAD,
    ],
    [
      'two lengths',
      [
        ['content-length', '3'],
        ['content-length', '4'],
      ],
      Buffer.from('abcd'),
      UNSIGNED_PAYLOAD,
    ],
    ['negative length', [['content-length', '-1']], Buffer.alloc(0), UNSIGNED_PAYLOAD],
    [
      'aws-chunked bad signature',
      [
        ['content-encoding', 'aws-chunked'],
        ['x-amz-decoded-content-length', String(data.length)],
        ['content-length', String(data.length + 200)],
      ],
      Buffer.concat([Buffer.from(`${data.length.toString(16)};chunk-signature=${sig}\r\n`), data, Buffer.from(`\r\n0;chunk-signature=${sig}\r\n\r\n`)]),
      'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    ],
    [
      'aws-chunked huge chunk',
      [
        ['content-encoding', 'aws-chunked'],
        ['x-amz-decoded-content-length', '16777216'],
        ['content-length', '16777300'],
      ],
      Buffer.from(`1000000;chunk-signature=${sig}\r\n`),
      'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    ],
    [
      'aws-chunked garbage header',
      [
        ['content-encoding', 'aws-chunked'],
        ['x-amz-decoded-content-length', String(data.length)],
        ['content-length', String(data.length + 10)],
      ],
      Buffer.concat([rng.bytes(10), data]),
      'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    ],
  ];
  const [label, headers, body, payloadHash] = rng.pick(cases);
  const req = signRaw({ method: 'PUT', target, headers, body, halfClose: true }, ctx.host, ctx.attacker, { payloadHash });
  ctx.mustNotExist.add(key);
  await send(ctx, 'framing', label, req);
}

const XML_DOCS = (keys: string[]) => [
  `<Delete><Object><Key>${keys[0]}</Key></Object><Quiet>true</Quiet></Delete>`,
  `<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>`,
  `<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>`,
  `<LifecycleConfiguration><Rule><ID>r</ID><Status>Enabled</Status><Filter><Prefix>p</Prefix></Filter><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>`,
  `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"x"</ETag></Part></CompleteMultipartUpload>`,
];

function mutateXml(rng: Rng, doc: string): Buffer {
  switch (rng.int(0, 6)) {
    case 0:
      return Buffer.from(doc.slice(0, rng.int(0, doc.length - 1)));
    case 1: {
      const b = Buffer.from(doc);
      for (let i = rng.int(1, 5); i > 0; i--) b[rng.int(0, b.length - 1)] = rng.int(0, 255);
      return b;
    }
    case 2:
      return Buffer.from(`${'<a>'.repeat(20_000)}${'</a>'.repeat(20_000)}`);
    case 3:
      return Buffer.from(
        `<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>${doc.replace('>', '>&c;')}`,
      );
    case 4:
      return Buffer.concat([Buffer.from(doc.slice(0, 20)), Buffer.from([0x00, 0xff, 0xfe]), Buffer.from(doc.slice(20))]);
    case 5:
      return Buffer.from(doc.replace(/<(\w+)>/, '<$1 xmlns="http://example/">').repeat(rng.int(1, 400)));
    default:
      return randomBytes(rng.int(0, 4000));
  }
}

/** Malformed XML to every operation that takes an XML body. */
async function xmlFuzz(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const docs = XML_DOCS(ctx.victimKeys);
  const i = rng.int(0, docs.length - 1);
  const body = mutateXml(rng, docs[i]!);
  const targets = [
    `/${ctx.attackerBucket}?delete`,
    `/${ctx.attackerBucket}/x-${n}?tagging`,
    `/${ctx.attackerBucket}?cors`,
    `/${ctx.attackerBucket}?lifecycle`,
    `/${ctx.attackerBucket}/mp-${n}?uploadId=${fuzzValue(rng)}`,
  ];
  const method = i === 0 || i === 4 ? 'POST' : 'PUT';
  const headers: Array<[string, string]> = [['content-length', String(body.length)]];
  if (rng.chance(0.6)) headers.push(['content-md5', md5Base64(body)]);
  const req = signRaw({ method, target: targets[i]!, headers, body }, ctx.host, ctx.attacker);
  await send(ctx, 'xml', `${method} ${targets[i]!.split('?')[1]?.split('=')[0]}`, req);
}

/** A multipart upload driven through misuse: bad part numbers, unknown ids, bad completions, use after abort. */
async function multipartMisuse(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const key = `mp-${n}`;
  const path = `/${ctx.attackerBucket}/${key}`;
  const signed = (method: string, query: string, body: Buffer = Buffer.alloc(0), headers: Array<[string, string]> = []) =>
    signRaw({ method, target: `${path}?${query}`, headers: [...headers, ['content-length', String(body.length)]], body }, ctx.host, ctx.attacker);
  const created = await send(ctx, 'multipart', 'create', signed('POST', 'uploads'));
  const uploadId = created.kind === 'answered' ? (/<UploadId>([^<]+)<\/UploadId>/.exec(created.body.toString())?.[1] ?? 'none') : 'none';
  const etags: string[] = [];
  let completed = false;
  for (let step = rng.int(2, 6); step > 0; step--) {
    const id = rng.chance(0.85) ? uploadId : fuzzValue(rng);
    switch (rng.int(0, 5)) {
      case 0:
      case 1: {
        const part = rng.pick(['1', '2', '3', '0', '10001', 'x', '-1', '']);
        const out = await send(ctx, 'multipart', `part ${part}`, signed('PUT', `partNumber=${part}&uploadId=${enc(id)}`, rng.bytes(rng.int(0, 9000))));
        if (out.kind === 'answered' && out.status === 200 && out.headers.etag) etags.push(out.headers.etag);
        break;
      }
      case 2:
        await send(ctx, 'multipart', 'list parts', signed('GET', `uploadId=${enc(id)}&part-number-marker=${fuzzValue(rng)}&max-parts=${fuzzValue(rng)}`));
        break;
      case 3: {
        const parts = etags.map((e, i) => ({ n: rng.chance(0.8) ? i + 1 : rng.int(0, 5), e: rng.chance(0.8) ? e : '"bogus"' }));
        if (rng.chance(0.3)) parts.reverse();
        const xml = Buffer.from(
          `<CompleteMultipartUpload>${parts.map((p) => `<Part><PartNumber>${p.n}</PartNumber><ETag>${p.e}</ETag></Part>`).join('')}</CompleteMultipartUpload>`,
        );
        const out = await send(ctx, 'multipart', `complete ${parts.length}`, signed('POST', `uploadId=${enc(id)}`, xml));
        if (out.kind === 'answered' && out.status === 200 && !out.body.includes('<Error>')) completed = true;
        break;
      }
      case 4:
        await send(ctx, 'multipart', 'abort', signed('DELETE', `uploadId=${enc(id)}`));
        break;
      default:
        await send(
          ctx,
          'multipart',
          'list uploads',
          signRaw(
            { method: 'GET', target: `/${ctx.attackerBucket}?uploads&key-marker=${fuzzValue(rng)}&upload-id-marker=${fuzzValue(rng)}`, headers: [] },
            ctx.host,
            ctx.attacker,
          ),
        );
    }
  }
  if (!completed) ctx.mustNotExist.add(key);
  await send(ctx, 'multipart', 'abort at end', signed('DELETE', `uploadId=${enc(uploadId)}`));
}

/** PUTs whose Content-MD5 does not match the body: BadDigest, nothing stored. */
async function badDigest(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const key = `digest-${n}`;
  const body = rng.bytes(rng.int(1, 50_000));
  const md5 = rng.chance(0.5) ? md5Base64(Buffer.concat([body, Buffer.from('x')])) : fuzzValue(rng);
  const req = signRaw(
    {
      method: 'PUT',
      target: `/${ctx.attackerBucket}/${key}`,
      headers: [
        ['content-md5', md5],
        ['content-length', String(body.length)],
      ],
      body,
    },
    ctx.host,
    ctx.attacker,
  );
  ctx.mustNotExist.add(key);
  await send(ctx, 'digest', 'bad content-md5', req);
}

/** One case drawn by weight. */
export async function runCase(rng: Rng, ctx: FuzzContext, n: number): Promise<void> {
  const r = rng.next();
  if (r < 0.4) return signedFuzz(rng, ctx, n);
  if (r < 0.55) return authAttack(rng, ctx);
  if (r < 0.67) return cutBody(rng, ctx, n);
  if (r < 0.75) return badFraming(rng, ctx, n);
  if (r < 0.85) return xmlFuzz(rng, ctx, n);
  if (r < 0.92) return multipartMisuse(rng, ctx, n);
  if (r < 0.95) return badDigest(rng, ctx, n);
  return delivery(rng, ctx, n);
}
