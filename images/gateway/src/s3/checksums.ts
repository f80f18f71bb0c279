import type { IncomingHttpHeaders } from 'node:http';
import {
  CHECKSUM_ALGORITHMS,
  checksumHeaders,
  DIGEST_BYTES,
  isChecksumAlgorithm,
  S3Error,
  startDigest,
  type ChecksumAlgorithm,
  type RunningDigest,
  type StoredHeaders,
} from '../../../object-model/src/index.js';
import type { BodyCheck } from './verified-body.js';

/**
 * S3's flexible checksums on uploads: `x-amz-checksum-<algorithm>` as a header, or named by
 * `x-amz-trailer` and sent after an aws-chunked body. Current SDKs send one by default (CRC32) instead
 * of Content-MD5, so this is how most uploads ask for their bytes to be checked.
 */
export function checksumHeader(algorithm: ChecksumAlgorithm): string {
  return `x-amz-checksum-${algorithm.toLowerCase()}`;
}

const ALGORITHM_BY_HEADER = new Map(CHECKSUM_ALGORITHMS.map((a) => [checksumHeader(a), a]));

/** The checksum an upload carries. */
export interface UploadChecksum {
  algorithm: ChecksumAlgorithm;
  /** Its header name (`x-amz-checksum-crc32`), also the trailer's name and the answer's header. */
  header: string;
  /** Base64 of the digest, as sent in the header; undefined when it follows the body as a trailer. */
  expected?: string;
}

/**
 * The checksum an upload's headers ask for, or undefined; InvalidRequest for what S3 refuses: two
 * checksums, an unknown algorithm, a value of the wrong form, a trailer without an aws-chunked body.
 */
export function uploadChecksum(headers: IncomingHttpHeaders, chunked: boolean): UploadChecksum | undefined {
  // Most uploads carry none of these: look them up without building anything.
  const sent: string[] = [];
  for (const name of ALGORITHM_BY_HEADER.keys()) if (headers[name] !== undefined) sent.push(name);
  const trailer = headers['x-amz-trailer'];
  const trailed =
    trailer === undefined
      ? []
      : String(trailer)
          .split(',')
          .map((name) => name.trim().toLowerCase())
          .filter((name) => name.startsWith('x-amz-checksum-'));
  for (const name of trailed) {
    if (!ALGORITHM_BY_HEADER.has(name)) throw new S3Error('InvalidRequest', `The value specified in the x-amz-trailer header is not supported: ${name}.`);
  }
  if (sent.length + trailed.length > 1)
    throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
  const declared = sdkAlgorithm(headers);
  const header = sent[0] ?? trailed[0];
  if (header === undefined) {
    if (declared)
      throw new S3Error('InvalidRequest', 'x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.');
    return undefined;
  }
  const algorithm = ALGORITHM_BY_HEADER.get(header)!;
  if (declared && declared !== algorithm)
    throw new S3Error('InvalidRequest', `x-amz-sdk-checksum-algorithm names ${declared}, but the checksum sent is ${header}.`);
  if (trailed.length > 0 && !chunked) throw new S3Error('InvalidRequest', 'x-amz-trailer needs an aws-chunked body (Content-Encoding: aws-chunked).');
  if (sent.length === 0) return { algorithm, header };
  const expected = String(headers[header]);
  checkValue(algorithm, header, expected);
  return { algorithm, header, expected };
}

/**
 * The whole object's checksum sent with CompleteMultipartUpload (`x-amz-checksum-<algorithm>`, a
 * composite one maybe with its `-N`), or undefined; InvalidRequest for two or a malformed value.
 */
export function objectChecksumHeader(headers: IncomingHttpHeaders): { algorithm: ChecksumAlgorithm; value: string } | undefined {
  const sent = [...ALGORITHM_BY_HEADER].filter(([name]) => headers[name] !== undefined);
  if (sent.length > 1) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
  if (sent.length === 0) return undefined;
  const [header, algorithm] = sent[0]!;
  const value = String(headers[header]).replace(/-\d+$/, '');
  checkValue(algorithm, header, value);
  return { algorithm, value };
}

/** The checksums a CompleteMultipartUpload document lists for a part (ChecksumCRC32, ...): at most one. */
export function listedPartChecksum(part: Record<string, unknown>): { algorithm: ChecksumAlgorithm; value: string } | undefined {
  const listed = CHECKSUM_ALGORITHMS.filter((a) => typeof part[`Checksum${a}`] === 'string');
  if (listed.length > 1) throw new S3Error('InvalidRequest', 'A part lists more than one checksum.');
  const algorithm = listed[0];
  return algorithm && { algorithm, value: String(part[`Checksum${algorithm}`]) };
}

/** A checksum as S3's XML answers name it: `<ChecksumCRC32>…</ChecksumCRC32>`, then `<ChecksumType>` when given. */
export function checksumXml(checksum: { algorithm: string; value: string; type?: string }): Record<string, string> {
  return { [`Checksum${checksum.algorithm}`]: checksum.value, ...(checksum.type ? { ChecksumType: checksum.type } : {}) };
}

function sdkAlgorithm(headers: IncomingHttpHeaders): ChecksumAlgorithm | undefined {
  const raw = headers['x-amz-sdk-checksum-algorithm'];
  if (raw === undefined) return undefined;
  const name = String(raw).toUpperCase();
  if (!isChecksumAlgorithm(name)) throw new S3Error('InvalidRequest', 'Value for x-amz-sdk-checksum-algorithm header is invalid.');
  return name;
}

/** A value must be the base64 of exactly the algorithm's digest. */
function checkValue(algorithm: ChecksumAlgorithm, header: string, value: string): void {
  const bytes = Buffer.from(value, 'base64');
  if (bytes.length !== DIGEST_BYTES[algorithm] || bytes.toString('base64') !== value) {
    throw new S3Error('InvalidRequest', `Value for ${header} header is invalid.`);
  }
}

/** The upload's checksum computed over its bytes and compared with the one sent (header or trailer). */
export class ChecksumCheck implements BodyCheck {
  private readonly digest: RunningDigest;
  /** Base64 of the body's checksum, once the body has passed the check (for the answer's header). */
  value: string | undefined;

  constructor(
    readonly checksum: UploadChecksum,
    /** The body's trailers, read once it has ended (aws-chunked). */
    private readonly trailers: () => Readonly<Record<string, string>> = () => ({}),
  ) {
    this.digest = startDigest(checksum.algorithm);
  }

  update(chunk: Buffer): void {
    this.digest.update(chunk);
  }

  /** Whether the value is known before the body (a header), rather than after it (a trailer). */
  get knownAhead(): boolean {
    return this.checksum.expected !== undefined;
  }

  /** The checksum as stored with the object: the value sent ahead, or the one the body passed with. */
  storedHeaders(): StoredHeaders | undefined {
    const value = this.checksum.expected ?? this.value;
    return value === undefined ? undefined : checksumHeaders({ algorithm: this.checksum.algorithm, value, type: 'FULL_OBJECT' });
  }

  async finish(): Promise<void> {
    const { algorithm, header } = this.checksum;
    let expected = this.checksum.expected;
    if (expected === undefined) {
      expected = this.trailers()[header];
      if (expected === undefined) throw new S3Error('MalformedTrailerError', `x-amz-trailer announced ${header}, but the body's trailer does not carry it.`);
      checkValue(algorithm, header, expected);
    }
    const actual = Buffer.from(await this.digest.digest()).toString('base64');
    if (actual !== expected) throw new S3Error('BadDigest', `The ${algorithm} you specified did not match the calculated checksum.`);
    this.value = actual;
  }
}
