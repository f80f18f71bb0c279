import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Encrypts secrets at rest (users' SigV4 secrets, operator-made buckets' backend secret keys) with
 * AES-256-GCM. The key is SHA-256 of the server secret (STRATA_SECRET_KEY), which only ever comes from
 * the environment; the control plane seals, the control and data planes open.
 */
export class SecretBox {
  private readonly key: Buffer;
  constructor(serverSecret: string) {
    this.key = createHash('sha256').update(serverSecret, 'utf8').digest();
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [iv, cipher.getAuthTag(), data].map((b) => b.toString('base64')).join('.');
  }

  open(sealed: string): string {
    const [iv, tag, data] = sealed.split('.').map((s) => Buffer.from(s, 'base64'));
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8');
  }
}
