import { createReadStream } from 'node:fs';
import http from 'node:http';

/** Stream a file up with PUT; resolves with MiB/s. */
export function putFile(url: string, file: string, size: number): Promise<number> {
  const u = new URL(url);
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'PUT', headers: { 'content-length': size } }, (res) => {
      res.resume();
      res.on('end', () => {
        if ((res.statusCode ?? 500) >= 300) reject(new Error(`PUT ${u.pathname} answered ${res.statusCode}`));
        else resolve(size / 1048576 / (Number(process.hrtime.bigint() - start) / 1e9));
      });
    });
    req.on('error', reject);
    createReadStream(file, { highWaterMark: 1 << 20 }).pipe(req);
  });
}

/** GET and discard the body; resolves with MiB/s. */
export function getDiscard(url: string, expected: number): Promise<number> {
  const u = new URL(url);
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    http
      .get({ host: u.hostname, port: u.port, path: u.pathname + u.search }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
        });
        res.on('end', () => {
          if (bytes !== expected) reject(new Error(`GET ${u.pathname}: ${bytes} bytes, expected ${expected} (status ${res.statusCode})`));
          else resolve(bytes / 1048576 / (Number(process.hrtime.bigint() - start) / 1e9));
        });
      })
      .on('error', reject);
  });
}
