import { randomBytes } from 'node:crypto';
import { mkdir, open, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import { CHUNK, PlainWindow, segmentRange, segmentSize } from '../../images/data-plane/src/encryption/chunked-aead.js';
import { CryptoPool, type PoolStream } from '../../images/data-plane/src/encryption/crypto-pool.js';
import { BATCH_CHUNKS, BATCHES_IN_FLIGHT, CRYPTO_THREAD_SOURCE } from '../../images/data-plane/src/encryption/crypto-threads.js';
import { FileSegmentDecryptor } from '../../images/data-plane/src/encryption/file-segment-decryptor.js';
import { ObjectEncryption } from '../../images/data-plane/src/encryption/object-encryption.js';
import { collect, failure, md5, sealed } from '../support/encryption-streams.js';
import { eventually } from '../support/eventually.js';
import { freshDirPerSuite } from '../support/temp-dir.js';

const BATCH = BATCH_CHUNKS * CHUNK;

/** A pool whose streams count the jobs they were asked to run, those answered (or dropped), and their closes. */
function countingPool(pool: CryptoPool): {
  threads: CryptoPool;
  seen: { asked: number; settled: number; closed: number; jobs: Array<Record<string, unknown>> };
} {
  const seen = { asked: 0, settled: 0, closed: 0, jobs: [] as Array<Record<string, unknown>> };
  const stream = (tenant: string): PoolStream => {
    const lane = pool.stream(tenant);
    return {
      run: (message, transfer) => {
        seen.asked++;
        seen.jobs.push(message);
        return lane.run(message, transfer).finally(() => seen.settled++);
      },
      close: () => {
        seen.closed++;
        lane.close();
      },
    };
  };
  return { threads: { stream } as CryptoPool, seen };
}

describe('data plane: encrypted reads of files on the encryption threads (FileSegmentDecryptor)', function () {
  this.timeout(60_000);
  const dir = freshDirPerSuite('strata-file-decrypt-');
  const key = randomBytes(32);
  // A blob of two segments (a multipart object's parts): the first, then a larger one of many batches.
  const firstPart = randomBytes(BATCH + 5 * CHUNK + 3);
  const data = randomBytes(12 * BATCH + 3 * CHUNK + 777);
  const storedAt = segmentSize(firstPart.length);
  const locator = 'ab'.padEnd(32, '0');
  let file: string;
  let stored: Buffer;
  const pools: CryptoPool[] = [];
  const poolOf = (source = CRYPTO_THREAD_SOURCE) => {
    const p = new CryptoPool(source, 2, 'test-file-crypto');
    pools.push(p);
    return p;
  };

  before(async () => {
    stored = Buffer.concat([await sealed(key, firstPart), await sealed(key, data)]);
    file = path.join(dir.path, 'blobs', 'ab', '00', locator);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, stored);
  });
  after(async () => {
    for (const p of pools) await p.close();
  });

  /** The second segment's plaintext [start, end], read from `at` (the file by default). */
  const reader = async (start: number, end: number, opts: { at?: string; threads?: CryptoPool; k?: Buffer } = {}) => {
    const r = segmentRange(data.length, start, end);
    const handle = await open(opts.at ?? file, 'r');
    const window = new PlainWindow(data.length, r.first, r.skip, end - start + 1);
    const stream = new FileSegmentDecryptor(handle, storedAt, { key: opts.k ?? key, window, tenant: 'alice', threads: opts.threads });
    return { stream, handle };
  };
  const read = async (start: number, end: number, opts: { at?: string; threads?: CryptoPool } = {}) => collect((await reader(start, end, opts)).stream);
  /** Bytes it passes on before it fails (or ends), and the error. */
  const received = async (stream: FileSegmentDecryptor) => {
    const out: Buffer[] = [];
    stream.on('data', (c: Buffer) => out.push(c));
    const err = await new Promise<Error | undefined>((resolve) => {
      stream.on('error', resolve);
      stream.on('end', () => resolve(undefined));
    });
    return { bytes: Buffer.concat(out), err };
  };

  it('reads whole segments and ranges exactly: only the chunks they cover, the first and last trimmed', async () => {
    const cases: Array<[number, number]> = [
      [0, data.length - 1],
      [1, data.length - 2],
      [CHUNK - 1, CHUNK],
      [BATCH - 1, BATCH],
      [5 * CHUNK + 3, 3 * BATCH + 9],
      [data.length - 1, data.length - 1],
      [7 * BATCH, data.length - 1],
    ];
    for (const [start, end] of cases) {
      const { threads, seen } = countingPool(poolOf());
      expect(md5(await read(start, end, { threads })), `[${start}, ${end}]`).to.equal(md5(data.subarray(start, end + 1)));
      const r = segmentRange(data.length, start, end);
      const chunks = Math.floor(end / CHUNK) - r.first + 1;
      expect(seen.asked, `[${start}, ${end}]: batches read`).to.equal(Math.ceil(chunks / BATCH_CHUNKS));
      // Each job reads its own chunks and nothing else (the prefix comes with it), each where the last ended:
      // one ascending pass over the chunks asked for, as the kernel's read-ahead expects.
      const reads = seen.jobs.map((m) => ({ at: m.at as number, length: m.length as number, prefix: Buffer.from(m.prefix as Uint8Array) }));
      expect(reads[0]!.at, `[${start}, ${end}]: first read`).to.equal(storedAt + r.from);
      for (const [i, read] of reads.entries()) {
        expect(read.prefix.equals(stored.subarray(storedAt, storedAt + 8)), `[${start}, ${end}]: prefix of job ${i}`).to.equal(true);
        if (i > 0) expect(read.at, `[${start}, ${end}]: job ${i}`).to.equal(reads[i - 1]!.at + reads[i - 1]!.length);
      }
      const lastRead = reads[reads.length - 1]!;
      expect(lastRead.at + lastRead.length - 1, `[${start}, ${end}]: last byte read`).to.equal(storedAt + r.to);
    }
  });

  it('a tampered chunk fails the stream, and no byte of its batch (nor after it) is passed on; so does a file cut short', async () => {
    const altered = Buffer.from(stored);
    const chunk = 2 * BATCH_CHUNKS + 3;
    altered[storedAt + 8 + chunk * (CHUNK + 16) + 100]! ^= 1;
    const tamperedFile = path.join(dir.path, 'tampered');
    await writeFile(tamperedFile, altered);
    const { stream, handle } = await reader(0, data.length - 1, { at: tamperedFile });
    const { bytes, err } = await received(stream);
    expect(err?.message).to.match(/failed authentication/);
    expect(bytes.length, 'bytes passed on').to.be.at.most(2 * BATCH);
    expect(bytes.equals(data.subarray(0, bytes.length)), 'only verified plaintext').to.equal(true);
    await eventually(() => expect(handle.fd, 'the file closed').to.equal(-1));

    const cutFile = path.join(dir.path, 'cut');
    await writeFile(cutFile, stored.subarray(0, stored.length - 10));
    expect((await failure(read(0, data.length - 1, { at: cutFile })))?.message).to.match(/failed authentication/);
  });

  it('a reader that never reads stops the reads: at most BATCHES_IN_FLIGHT batches asked for beyond what it took', async () => {
    const { threads, seen } = countingPool(poolOf());
    const { stream, handle } = await reader(0, data.length - 1, { threads });
    let taken = 0;
    // A destination that takes one write and never finishes it.
    const stuck = new Writable({ write: (chunk: Buffer) => void (taken += chunk.length) });
    stream.pipe(stuck);
    await eventually(() => seen.asked > 0 && seen.settled === seen.asked, 'the asked batches answered');
    const total = Math.ceil(data.length / BATCH);
    expect(seen.asked, `batches asked of ${total}`).to.be.at.most(BATCHES_IN_FLIGHT + 2);
    expect(taken).to.be.at.most(BATCH);
    stream.destroy();
    await eventually(() => expect(handle.fd).to.equal(-1));
  });

  it('a reader gone mid-stream closes the file and drops the batches not yet read', async () => {
    const { threads, seen } = countingPool(poolOf());
    const { stream, handle } = await reader(0, data.length - 1, { threads });
    // Gone from within its 'data' handler (as a socket that closes while written to).
    let asked = 0;
    const first = await new Promise<Buffer>((resolve) =>
      stream.once('data', (c: Buffer) => {
        asked = seen.asked;
        stream.destroy();
        resolve(c);
      }),
    );
    expect(first.equals(data.subarray(0, first.length))).to.equal(true);
    await eventually(() => expect(handle.fd, 'the file closed').to.equal(-1));
    expect(seen.closed, 'its pool stream closed').to.equal(1);
    await eventually(() => seen.settled === seen.asked, 'every batch answered or dropped');
    expect(seen.asked, 'no batch asked for after the reader left').to.equal(asked);
    expect(asked).to.be.below(Math.ceil(data.length / BATCH));
  });

  it('a thread that fails fails only its own stream, and that stream closes its file', async () => {
    const doomedKey = randomBytes(32);
    const source = CRYPTO_THREAD_SOURCE.replace(
      "parentPort.on('message', (m) => {",
      `parentPort.on('message', (m) => {\n  if (Buffer.from(m.key).equals(Buffer.from('${doomedKey.toString('hex')}', 'hex'))) throw new Error('thread crashed');`,
    );
    const threads = poolOf(source);
    const good = await reader(0, data.length - 1, { threads });
    const doomed = await reader(0, data.length - 1, { threads, k: doomedKey });
    const [goodRead, doomedRead] = await Promise.allSettled([collect(good.stream), collect(doomed.stream)]);
    expect(doomedRead.status).to.equal('rejected');
    expect(goodRead.status).to.equal('fulfilled');
    expect(md5((goodRead as PromiseFulfilledResult<Buffer>).value)).to.equal(md5(data));
    await eventually(() => expect([good.handle.fd, doomed.handle.fd]).to.deep.equal([-1, -1]));
  });

  it('ObjectEncryption reads an encrypted file blob on the threads (no stored byte through the event loop), across part borders', async () => {
    const backend = new FsBackend(dir.path);
    let gets = 0;
    const opened: FileHandle[] = [];
    const get = backend.get.bind(backend);
    backend.get = (...args) => {
      gets++;
      return get(...args);
    };
    const openFile = backend.openFile.bind(backend);
    backend.openFile = async (l) => {
      const handle = await openFile(l);
      if (handle) opened.push(handle);
      return handle;
    };
    const whole = Buffer.concat([firstPart, data]);
    const segments = [firstPart.length, data.length];
    const read = async (start: number, end: number) => collect(await ObjectEncryption.decrypting(backend, locator, segments, key, { start, end }, 'alice'));
    expect(md5(await read(0, whole.length - 1))).to.equal(md5(whole));
    const [start, end] = [100, firstPart.length + 2 * BATCH + 17];
    expect(md5(await read(start, end))).to.equal(md5(whole.subarray(start, end + 1)));
    expect(gets, 'stored bytes read by the event loop').to.equal(0);
    expect(opened).to.have.length(4);
    await eventually(() => expect(opened.map((h) => h.fd)).to.deep.equal([-1, -1, -1, -1]));
  });
});
