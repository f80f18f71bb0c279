import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * A secret kept in the data dir (mode 0600), generated on first start. Used for the JWT signing
 * secret and the server key sealing SigV4 secrets: both must survive a restart on the same data,
 * or tokens stop verifying and stored secrets stop decrypting.
 */
export async function persistentSecret(dataDir: string, name: string): Promise<string> {
  const file = path.join(dataDir, 'secrets', name);
  try {
    const value = (await readFile(file, 'utf8')).trim();
    if (value.length >= 32) return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const value = randomBytes(32).toString('hex');
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

export function ephemeralSecret(): string {
  return randomBytes(32).toString('hex');
}
