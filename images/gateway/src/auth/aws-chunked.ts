import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../object-model/src/index.js';
import { chunkStringToSign, sign, signaturesEqual, trailerStringToSign } from './sigv4.js';

export interface ChunkSigning {
  key: Buffer;
  scope: string;
  amzDate: string;
  seedSignature: string;
  /** The body ends in trailers signed by `x-amz-trailer-signature` (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER). */
  trailer?: boolean;
}

const TRAILER_SIGNATURE = 'x-amz-trailer-signature';

/** Largest chunk size accepted (clients use 64 KiB..8 MiB); a chunk streams through, it is never held whole. */
const MAX_CHUNK = 16 * 1024 * 1024;
const MAX_LINE = 4096;

/** Bytes held back unverified by every signed decoder of this process (see AwsChunkedDecoder). */
let heldAcrossDecoders = 0;
export const awsChunkedHeldBytes = (): number => heldAcrossDecoders;

/**
 * Decodes an `aws-chunked` body while it streams: `hex-size[;chunk-signature=sig]\r\n data \r\n ...
 * 0[;chunk-signature=sig]\r\n [trailers]\r\n`. A bad chunk fails the stream with
 * SignatureDoesNotMatch, a truncated one with IncompleteBody.
 *
 * With signing, chunk data streams on as it arrives while its hash is taken, except the last piece
 * received, which is held back until every signature (finally the empty chunk's, and the trailers'
 * when they are signed) holds. So memory per connection is one network read, whatever the chunk size,
 * and the bytes passed on stay short of the whole body until it is verified: a failed signature
 * errors the stream before the upstream upload has its body, so the upload is abandoned and nothing
 * is stored (as for VerifiedBody). That holds only if the body cannot reach its declared length
 * early, so the decoded length is capped at `declaredLength` (x-amz-decoded-content-length).
 */
export class AwsChunkedDecoder extends Transform {
  private buffer: Buffer = Buffer.alloc(0);
  private state: 'header' | 'data' | 'data-crlf' | 'trailer' | 'done' = 'header';
  private remaining = 0;
  private decoded = 0;
  private chunkSignature = '';
  private previousSignature: string;
  /** The last piece of data received, passed on once more data arrives or the whole body is verified. */
  private held: Buffer | undefined;
  private hash = createHash('sha256');
  readonly trailers: Record<string, string> = {};

  constructor(
    private readonly signing: ChunkSigning | undefined,
    private readonly declaredLength = Infinity,
  ) {
    super();
    this.previousSignature = signing?.seedSignature ?? '';
  }

  /** Bytes this decoder holds back unverified. */
  get heldBytes(): number {
    return this.held?.length ?? 0;
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    this.hold(undefined);
    done(err);
  }

  private hold(piece: Buffer | undefined): void {
    heldAcrossDecoders += (piece?.length ?? 0) - this.heldBytes;
    this.held = piece;
  }

  /** The whole body is verified: pass on what was held back. */
  private release(): void {
    const piece = this.held;
    this.hold(undefined);
    if (piece) this.push(piece);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    try {
      this.drain();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    if (this.state !== 'done' && !(this.state === 'trailer' && this.buffer.length === 0)) {
      done(new S3Error('IncompleteBody', 'The aws-chunked body ended before its final chunk.'));
      return;
    }
    try {
      // Trailers not closed by an empty line still end the body.
      if (this.state === 'trailer') this.endTrailers();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  private readLine(): string | undefined {
    const idx = this.buffer.indexOf('\r\n');
    if (idx < 0) {
      if (this.buffer.length > MAX_LINE) throw new S3Error('InvalidRequest', 'Malformed aws-chunked encoding.');
      return undefined;
    }
    const line = this.buffer.subarray(0, idx).toString('latin1');
    this.buffer = this.buffer.subarray(idx + 2);
    return line;
  }

  private drain(): void {
    for (;;) {
      if (this.state === 'header') {
        const line = this.readLine();
        if (line === undefined) return;
        const [sizeHex, ...ext] = line.split(';');
        if (!/^[0-9a-fA-F]+$/.test(sizeHex.trim())) throw new S3Error('InvalidRequest', 'Malformed aws-chunked chunk header.');
        this.remaining = parseInt(sizeHex, 16);
        if (this.remaining > MAX_CHUNK) throw new S3Error('InvalidRequest', 'aws-chunked chunk too large.');
        this.chunkSignature =
          ext
            .map((e) => e.trim())
            .find((e) => e.startsWith('chunk-signature='))
            ?.slice('chunk-signature='.length) ?? '';
        if (this.signing && !this.chunkSignature) throw new S3Error('SignatureDoesNotMatch', 'Missing chunk signature.');
        this.hash = createHash('sha256');
        this.state = 'data';
        if (this.remaining === 0) {
          this.verifyChunk();
          if (!this.signing?.trailer) this.release();
          this.state = 'trailer';
        }
      } else if (this.state === 'data') {
        if (this.buffer.length === 0) return;
        const take = Math.min(this.remaining, this.buffer.length);
        const piece = this.buffer.subarray(0, take);
        this.buffer = this.buffer.subarray(take);
        this.remaining -= take;
        this.decoded += take;
        if (this.decoded > this.declaredLength) throw new S3Error('InvalidRequest', 'The aws-chunked body is longer than its x-amz-decoded-content-length.');
        if (this.signing) {
          this.hash.update(piece);
          const previous = this.held;
          this.hold(piece);
          if (previous) this.push(previous);
        } else {
          this.push(piece);
        }
        if (this.remaining === 0) {
          this.verifyChunk();
          this.state = 'data-crlf';
        }
      } else if (this.state === 'data-crlf') {
        if (this.buffer.length < 2) return;
        if (this.buffer[0] !== 0x0d || this.buffer[1] !== 0x0a) throw new S3Error('InvalidRequest', 'Malformed aws-chunked encoding.');
        this.buffer = this.buffer.subarray(2);
        this.state = 'header';
      } else if (this.state === 'trailer') {
        const line = this.readLine();
        if (line === undefined) return;
        if (line === '') {
          this.endTrailers();
        } else {
          const colon = line.indexOf(':');
          if (colon > 0) this.trailers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
      } else {
        // Anything after the final chunk is ignored.
        this.buffer = Buffer.alloc(0);
        return;
      }
    }
  }

  /** The trailers are complete: check their signature, then pass on the last chunk. */
  private endTrailers(): void {
    this.verifyTrailers();
    this.release();
    this.state = 'done';
  }

  /** Signed trailers: `name:value\n` of each trailer as sent, chained on the final chunk's signature. */
  private verifyTrailers(): void {
    if (!this.signing?.trailer) return;
    const signature = this.trailers[TRAILER_SIGNATURE];
    if (!signature) throw new S3Error('SignatureDoesNotMatch', 'The trailers carry no x-amz-trailer-signature.');
    const canonical = Object.entries(this.trailers)
      .filter(([name]) => name !== TRAILER_SIGNATURE)
      .map(([name, value]) => `${name}:${value}\n`)
      .join('');
    const expected = sign(this.signing.key, trailerStringToSign(this.signing.amzDate, this.signing.scope, this.previousSignature, canonical));
    if (!signaturesEqual(expected, signature)) throw new S3Error('SignatureDoesNotMatch', 'The trailer signature does not match.');
  }

  private verifyChunk(): void {
    if (!this.signing) return;
    const expected = sign(this.signing.key, chunkStringToSign(this.signing.amzDate, this.signing.scope, this.previousSignature, this.hash.digest('hex')));
    if (!signaturesEqual(expected, this.chunkSignature)) throw new S3Error('SignatureDoesNotMatch', 'The chunk signature does not match.');
    this.previousSignature = this.chunkSignature;
  }
}
