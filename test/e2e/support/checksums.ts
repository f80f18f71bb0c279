import zlib from 'node:zlib';
import { httpExchange, type HttpAnswer } from '../../support/http.js';
import { rootPresign } from './s3.js';

/** The base64 CRC32 of `data`, as x-amz-checksum-crc32 carries it. */
export function crc32(data: Buffer): string {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data) >>> 0);
  return out.toString('base64');
}

/** A PUT of an aws-chunked body with an unsigned trailer, as SDKs send streams, through a URL the root user presigns. */
export function chunkedPut(endpoint: string, path: string, pieces: Buffer[], trailer: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const framed = Buffer.concat([
    ...pieces.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]),
    Buffer.from(`0\r\n${trailer}\r\n`),
  ]);
  const decoded = pieces.reduce((n, p) => n + p.length, 0);
  const signed = { 'x-amz-decoded-content-length': String(decoded), 'x-amz-trailer': 'x-amz-checksum-crc32', ...headers };
  const url = new URL(rootPresign(endpoint, 'PUT', path, { headers: signed }));
  return httpExchange(url, { method: 'PUT', headers: { 'content-encoding': 'aws-chunked', 'content-length': framed.length, ...signed } }, framed);
}
