import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT_PASSWORD, ROOT_USER } from './platform.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a real client asynchronously (the platform serves it from this same process). */
export function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 120_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

function baseEnv(home: string): NodeJS.ProcessEnv {
  // Nothing from this machine's own configuration: a throw-away HOME, no CA bundle override.
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8' };
  return env;
}

/** Debian's AWS CLI v2 (`/usr/bin/aws`; a v1 from pyenv may come first on PATH). */
export function awsCli(endpoint: string, home: string) {
  const env = {
    ...baseEnv(home),
    AWS_ACCESS_KEY_ID: ROOT_USER,
    AWS_SECRET_ACCESS_KEY: ROOT_PASSWORD,
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_CONFIG_FILE: path.join(home, 'aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'aws-credentials'),
    AWS_PAGER: '',
  };
  return (...args: string[]) => run('/usr/bin/aws', ['--endpoint-url', endpoint, ...args], env);
}

/** s3cmd with its own config file: path style, plain HTTP, SigV4. */
export async function s3cmd(endpoint: string, home: string) {
  const host = new URL(endpoint).host;
  const config = path.join(home, 's3cfg');
  await mkdir(home, { recursive: true });
  await writeFile(
    config,
    [
      '[default]',
      `access_key = ${ROOT_USER}`,
      `secret_key = ${ROOT_PASSWORD}`,
      `host_base = ${host}`,
      `host_bucket = ${host}`,
      'use_https = False',
      'signature_v2 = False',
      'bucket_location = us-east-1',
      '',
    ].join('\n'),
  );
  return (...args: string[]) => run('s3cmd', ['-c', config, ...args], baseEnv(home));
}

/** rclone configured through env only (remote "strata"); AWS_CA_BUNDLE must not be set for it. */
export function rclone(endpoint: string, home: string) {
  const env = {
    ...baseEnv(home),
    RCLONE_CONFIG: path.join(home, 'rclone.conf'),
    RCLONE_CONFIG_STRATA_TYPE: 's3',
    RCLONE_CONFIG_STRATA_PROVIDER: 'Other',
    RCLONE_CONFIG_STRATA_ACCESS_KEY_ID: ROOT_USER,
    RCLONE_CONFIG_STRATA_SECRET_ACCESS_KEY: ROOT_PASSWORD,
    RCLONE_CONFIG_STRATA_ENDPOINT: endpoint,
    RCLONE_CONFIG_STRATA_REGION: 'us-east-1',
  };
  return (...args: string[]) => run('rclone', args, env);
}
