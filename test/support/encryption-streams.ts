import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SegmentDecryptor, SegmentEncryptor } from '../../images/data-plane/src/encryption/chunked-aead.js';

/** Helpers of the tests of the data plane's encryption streams (chunked-aead.ts and the encryption threads). */

export const md5 = (b: Buffer): string => createHash('md5').update(b).digest('hex');

/** `data` as a stream of chunks of the given sizes (cycled), as sockets deliver bodies. */
export function chunked(data: Buffer, sizes: number[]): Readable {
  const parts: Buffer[] = [];
  for (let at = 0, i = 0; at < data.length; i++) {
    const n = sizes[i % sizes.length]!;
    parts.push(data.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

/** Every byte `stream` passes on, joined. */
export async function collect(stream: Readable): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of stream) out.push(c as Buffer);
  return Buffer.concat(out);
}

/** `data` sealed as one segment under `key` (the in-place encryptor). */
export async function sealed(key: Buffer, data: Buffer): Promise<Buffer> {
  const encryptor = new SegmentEncryptor(key, () => undefined, data.length);
  const [stored] = await Promise.all([collect(encryptor), pipeline(Readable.from([data]), encryptor)]);
  return stored;
}

/** The plaintext of a whole segment of `plain` bytes (the in-place decryptor). */
export const decrypted = (key: Buffer, stored: Buffer, plain: number): Promise<Buffer> =>
  collect(Readable.from([stored]).pipe(new SegmentDecryptor(key, undefined, plain, 0, 0, plain)));

/** The error `p` fails with; undefined when it does not fail. */
export const failure = (p: Promise<unknown>): Promise<Error | undefined> =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );
