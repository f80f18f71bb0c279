import { spawn } from 'node:child_process';
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

/**
 * The same transfers with curl (C, much less CPU per MiB than a Node.js client): `BENCH_CLIENT=curl`.
 * Resolves with MiB/s (wall clock around the curl process); its CPU time shows in this process's
 * children counters (/proc/self/stat cutime + cstime) once it has exited.
 */
export function curlTransfer(method: 'GET' | 'PUT', url: string, size: number, file?: string): Promise<number> {
  const args = ['-s', '-S', '-f', '-o', '/dev/null', '-w', '%{size_download} %{size_upload}', ...(method === 'PUT' ? ['-T', file!, '-H', 'Expect:'] : []), url];
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('curl', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const [down, up] = out.trim().split(' ').map(Number);
      const moved = method === 'GET' ? down : up;
      if (code !== 0 || moved !== size) {
        reject(new Error(`curl ${method} ${new URL(url).pathname}: exit ${code}, ${moved} bytes, expected ${size}`));
        return;
      }
      resolve(size / 1048576 / seconds);
    });
  });
}
