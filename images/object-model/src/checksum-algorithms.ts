import { createHash } from 'node:crypto';
import { pipeline, Transform, type Readable } from 'node:stream';
import { Crc32, Crc32c, Crc64Nvme } from '@aws-sdk/checksums/crc';

/**
 * S3's flexible checksum algorithms: running digests (the gateway checks uploads with them, the data
 * plane checks copied parts), and the checksums of a multipart object made from its parts' — COMPOSITE
 * (a digest of the parts' digests, `-N`) and FULL_OBJECT (the CRC of the whole object, combined from
 * the parts' CRCs without reading a byte again).
 */
export const DIGEST_BYTES = { CRC32: 4, CRC32C: 4, CRC64NVME: 8, SHA1: 20, SHA256: 32 } as const;
export type ChecksumAlgorithm = keyof typeof DIGEST_BYTES;
export const CHECKSUM_ALGORITHMS = Object.keys(DIGEST_BYTES) as ChecksumAlgorithm[];

export function isChecksumAlgorithm(name: string): name is ChecksumAlgorithm {
  return (CHECKSUM_ALGORITHMS as string[]).includes(name);
}

export interface RunningDigest {
  update(data: Uint8Array): void;
  digest(): Promise<Uint8Array>;
}

export function startDigest(algorithm: ChecksumAlgorithm): RunningDigest {
  switch (algorithm) {
    case 'CRC32':
      return new Crc32();
    case 'CRC32C':
      return new Crc32c();
    case 'CRC64NVME':
      return new Crc64Nvme();
    case 'SHA1':
    case 'SHA256': {
      const hash = createHash(algorithm.toLowerCase());
      return { update: (data) => hash.update(data), digest: async () => hash.digest() };
    }
  }
}

/** `source` passed through unchanged, each chunk fed to `digest` on the way (errors travel on). */
export function digesting(source: Readable, digest: RunningDigest): Readable {
  return observed(source, (chunk) => digest.update(chunk));
}

/**
 * `source` passed through unchanged, each chunk shown to `see` as the reader takes it. Unlike a 'data'
 * listener it leaves the reader in charge: nothing flows before the reader reads, and backpressure holds.
 * Errors travel on; destroying the result destroys `source`.
 */
export function observed(source: Readable, see: (chunk: Buffer) => void): Readable {
  const through = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      see(chunk);
      done(null, chunk);
    },
  });
  return pipeline(source, through, () => undefined);
}

/** The types of multipart checksum an algorithm allows, the first being S3's default. */
export function multipartChecksumTypes(algorithm: ChecksumAlgorithm): Array<'COMPOSITE' | 'FULL_OBJECT'> {
  if (algorithm === 'CRC64NVME') return ['FULL_OBJECT'];
  if (algorithm === 'SHA1' || algorithm === 'SHA256') return ['COMPOSITE'];
  return ['COMPOSITE', 'FULL_OBJECT'];
}

/** COMPOSITE: the algorithm's digest of the parts' digests one after the other, then `-<parts>`. */
export async function compositeChecksum(algorithm: ChecksumAlgorithm, parts: readonly string[]): Promise<string> {
  const digest = startDigest(algorithm);
  for (const part of parts) digest.update(Buffer.from(part, 'base64'));
  return `${Buffer.from(await digest.digest()).toString('base64')}-${parts.length}`;
}

/** Reflected polynomials of the CRCs (each with an all-ones start and final XOR, which combining relies on). */
const REFLECTED_POLYNOMIAL: Partial<Record<ChecksumAlgorithm, bigint>> = {
  CRC32: 0xedb88320n,
  CRC32C: 0x82f63b78n,
  CRC64NVME: 0x9a6c9329ac4bc9b5n,
};

/**
 * FULL_OBJECT: the CRC of the parts' bytes one after the other from each part's CRC and size, as
 * zlib's crc32_combine does it: the CRC so far is advanced over as many zero bytes as the next part
 * has (a GF(2) matrix: powers of the operator that appends one zero byte), then XORed with that part's
 * CRC. Parts mostly share one size, so each size's operator is made once.
 */
export function fullObjectChecksum(algorithm: ChecksumAlgorithm, parts: ReadonlyArray<{ value: string; size: number }>): string {
  const polynomial = REFLECTED_POLYNOMIAL[algorithm];
  if (polynomial === undefined) throw new Error(`${algorithm} has no full-object checksum of parts`);
  const width = DIGEST_BYTES[algorithm] * 8;
  const operators = new Map<number, bigint[] | undefined>();
  let crc: bigint | undefined;
  for (const part of parts) {
    const next = BigInt(`0x${Buffer.from(part.value, 'base64').toString('hex')}`);
    if (crc === undefined) {
      crc = next;
      continue;
    }
    if (!operators.has(part.size)) operators.set(part.size, zeroBytesOperator(algorithm, polynomial, width, part.size));
    const operator = operators.get(part.size);
    crc = (operator ? times(operator, crc) : crc) ^ next;
  }
  return Buffer.from((crc ?? 0n).toString(16).padStart(width / 4, '0'), 'hex').toString('base64');
}

/** A GF(2) matrix (one row per bit) applied to a vector. */
function times(matrix: readonly bigint[], vector: bigint): bigint {
  let sum = 0n;
  for (let i = 0; vector !== 0n; i++, vector >>= 1n) if (vector & 1n) sum ^= matrix[i]!;
  return sum;
}

/** `a` after `b`. */
function compose(a: readonly bigint[], b: readonly bigint[]): bigint[] {
  return b.map((row) => times(a, row));
}

/** Per algorithm: the operators that append 1, 2, 4, ... zero bytes. */
const zeroBytePowers = new Map<ChecksumAlgorithm, bigint[][]>();

/** The operator that appends `length` zero bytes; undefined for none. */
function zeroBytesOperator(algorithm: ChecksumAlgorithm, polynomial: bigint, width: number, length: number): bigint[] | undefined {
  let powers = zeroBytePowers.get(algorithm);
  if (!powers) {
    // One zero bit: shift right, and XOR the polynomial when the bit shifted out was set.
    let operator: bigint[] = [polynomial, ...Array.from({ length: width - 1 }, (_, n) => 1n << BigInt(n))];
    for (let i = 0; i < 3; i++) operator = compose(operator, operator);
    powers = [operator];
    zeroBytePowers.set(algorithm, powers);
  }
  let result: bigint[] | undefined;
  for (let k = 0, rest = length; rest > 0; k++, rest = Math.floor(rest / 2)) {
    if (powers.length <= k) powers.push(compose(powers[k - 1]!, powers[k - 1]!));
    if (rest % 2 === 1) result = result ? compose(powers[k]!, result) : powers[k]!;
  }
  return result;
}
