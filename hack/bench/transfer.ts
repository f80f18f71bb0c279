import { spawn } from 'node:child_process';

/**
 * A large PUT (of `file`) or GET (discarded) with curl, the benchmarks' client for large transfers
 * (C: far less CPU per MiB than a Node.js client, so the server is what is measured). Resolves with
 * MiB/s (wall clock around the curl process); its CPU time shows in this process's children
 * counters (/proc/self/stat cutime + cstime) once it has exited.
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
