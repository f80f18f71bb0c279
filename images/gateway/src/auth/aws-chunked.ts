import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from '../../../service-kit/src/index.js';
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

/** Largest chunk we hold while checking its signature (clients use 64 KiB..8 MiB). */
const MAX_CHUNK = 16 * 1024 * 1024;
const MAX_LINE = 4096;

/**
 * Decodes an `aws-chunked` body while it streams: `hex-size[;chunk-signature=sig]\r\n data \r\n ...
 * 0[;chunk-signature=sig]\r\n [trailers]\r\n`. With signing, each chunk's signature is verified
 * (chained on the previous one) before its bytes are passed on, so a forged chunk never reaches
 * storage; a bad chunk fails the stream with SignatureDoesNotMatch, a truncated one with IncompleteBody.
 * With signed trailers, the last chunk is held until the trailers' signature holds as well.
 */
export class AwsChunkedDecoder extends Transform {
  private buffer: Buffer = Buffer.alloc(0);
  private state: 'header' | 'data' | 'data-crlf' | 'trailer' | 'done' = 'header';
  private remaining = 0;
  private chunkSignature = '';
  private previousSignature: string;
  private readonly parts: Buffer[] = [];
  /** The last verified chunk, passed on only once the next signature (finally the empty chunk's) holds. */
  private held: Buffer[] = [];
  private hash = createHash('sha256');
  readonly trailers: Record<string, string> = {};

  constructor(private readonly signing: ChunkSigning | undefined) {
    super();
    this.previousSignature = signing?.seedSignature ?? '';
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
        this.chunkSignature = ext.map((e) => e.trim()).find((e) => e.startsWith('chunk-signature='))?.slice('chunk-signature='.length) ?? '';
        if (this.signing && !this.chunkSignature) throw new S3Error('SignatureDoesNotMatch', 'Missing chunk signature.');
        this.hash = createHash('sha256');
        this.state = 'data';
        if (this.remaining === 0) {
          this.verifyChunk();
          if (!this.signing?.trailer) for (const p of this.held.splice(0)) this.push(p);
          this.state = 'trailer';
        }
      } else if (this.state === 'data') {
        if (this.buffer.length === 0) return;
        const take = Math.min(this.remaining, this.buffer.length);
        const piece = this.buffer.subarray(0, take);
        this.buffer = this.buffer.subarray(take);
        this.remaining -= take;
        if (this.signing) {
          this.hash.update(piece);
          this.parts.push(piece);
        } else {
          this.push(piece);
        }
        if (this.remaining === 0) {
          if (this.signing) {
            this.verifyChunk();
            for (const p of this.held.splice(0)) this.push(p);
            this.held = this.parts.splice(0);
          }
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
    for (const p of this.held.splice(0)) this.push(p);
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
