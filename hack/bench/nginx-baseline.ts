import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Debian's nginx-light serving and accepting files (WebDAV PUT) from a directory: the baseline
 * the gateway is compared with, on the same machine and in the same run.
 */
export interface NginxBaseline {
  url: string;
  root: string;
  stop(): Promise<void>;
}

/** `workers`: nginx's worker_processes (2: one per core of this machine; issue 41's table uses 1). */
export async function startNginx(workDir: string, port: number, workers = 2): Promise<NginxBaseline> {
  const root = path.join(workDir, 'nginx-root');
  const temp = path.join(workDir, 'nginx-temp');
  await mkdir(root, { recursive: true });
  await mkdir(temp, { recursive: true });
  const conf = path.join(workDir, 'nginx.conf');
  await writeFile(
    conf,
    `${process.getuid?.() === 0 ? 'user root;\n' : ''}worker_processes ${workers};
daemon off;
pid ${path.join(workDir, 'nginx.pid')};
error_log ${path.join(workDir, 'nginx-error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path ${temp};
  proxy_temp_path ${temp};
  fastcgi_temp_path ${temp};
  uwsgi_temp_path ${temp};
  scgi_temp_path ${temp};
  client_max_body_size 0;
  server {
    listen 127.0.0.1:${port};
    root ${root};
    location / {
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw;
    }
  }
}
`,
  );
  const child: ChildProcess = spawn('/usr/sbin/nginx', ['-c', conf, '-p', workDir], { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`${url}/`, { method: 'HEAD' });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    root,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGQUIT');
      }),
  };
}
