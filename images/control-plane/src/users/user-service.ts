import { SecretBox, isUniqueViolation } from '../../../service-kit/src/index.js';
import { S3Error, USER_NAME, type KeyScope, type ScopedKeyCredentials } from '../../../object-model/src/index.js';
import type { ScopedKeyStore, StoredScopedKey, UserStore } from '../metadata/store.js';
import { hashPassword, newAccessKey, newSecretKey, verifyPassword } from './credentials.js';

export interface Credentials {
  username: string;
  accessKey: string;
  secretKey: string;
  /** A scoped key's limits (its `username` is its parent's); absent for a user's own key. */
  scope?: KeyScope;
}

/** "409 InvalidArgument" as the internal API names it for a taken user name. */
class UserExistsError extends S3Error {
  override readonly status = 409;
  constructor(username: string) {
    super('InvalidArgument', `user ${JSON.stringify(username)} already exists`);
  }
}

/** "409 InvalidArgument" for an operator key whose name or id another key (or user) has. */
class ScopedKeyConflictError extends S3Error {
  override readonly status = 409;
  constructor(message: string) {
    super('InvalidArgument', message);
  }
}

/** Users and their credentials: scrypt password hashes, SigV4 secrets sealed with the server key. */
export class UserService {
  private readonly box: SecretBox;

  constructor(
    private readonly users: UserStore,
    serverSecret: string,
    private readonly scopedKeys?: ScopedKeyStore,
  ) {
    this.box = new SecretBox(serverSecret);
  }

  /** Root's access key is its user name and its secret is its password, as with MinIO's root credentials. */
  async bootstrapRoot(username: string, password: string): Promise<void> {
    await this.users.upsertRoot({
      username,
      passwordHash: await hashPassword(password),
      accessKey: username,
      secretKeyEnc: this.box.seal(password),
    });
  }

  async createUser(username: unknown, password: unknown): Promise<Credentials> {
    if (typeof username !== 'string' || !USER_NAME.test(username)) {
      throw new S3Error('InvalidArgument', 'username: 3 to 64 characters of letters, digits and . _ @ + -, starting with a letter or digit');
    }
    if (typeof password !== 'string' || password.length < 8 || password.length > 256) {
      throw new S3Error('InvalidArgument', 'password: 8 to 256 characters');
    }
    const secretKey = newSecretKey();
    const accessKey = newAccessKey();
    try {
      await this.users.insert({ username, passwordHash: await hashPassword(password), accessKey, secretKeyEnc: this.box.seal(secretKey) });
    } catch (err) {
      if (isUniqueViolation(err)) throw new UserExistsError(username);
      throw err;
    }
    return { username, accessKey, secretKey };
  }

  async verify(username: unknown, password: unknown): Promise<{ username: string; accessKey: string }> {
    const user = typeof username === 'string' ? await this.users.get(username) : undefined;
    const ok = user && typeof password === 'string' && (await verifyPassword(password, user.passwordHash));
    if (!user || !ok) throw new S3Error('AccessDenied', 'invalid user name or password');
    return { username: user.username, accessKey: user.accessKey };
  }

  /** A user's own key, or a scoped key (then answered with its parent as `username` and its scope). */
  async credentials(accessKey: string): Promise<Credentials> {
    const user = await this.users.getByAccessKey(accessKey);
    if (user) return { username: user.username, accessKey: user.accessKey, secretKey: this.box.open(user.secretKeyEnc) };
    const scoped = await this.scopedKeys?.getByAccessKey(accessKey);
    if (!scoped) throw new S3Error('InvalidAccessKeyId');
    return { username: scoped.parent, accessKey: scoped.accessKey, secretKey: this.box.open(scoped.secretKeyEnc), scope: scoped.scope };
  }

  /** A new scoped key of `parent` (who must exist); its secret is answered this once. */
  async createScopedKey(parent: string, scope: KeyScope, name?: string): Promise<ScopedKeyCredentials> {
    const store = this.scopedStore();
    if (!(await this.users.get(parent))) throw new S3Error('InvalidArgument', `user ${JSON.stringify(parent)} does not exist`);
    const secretKey = newSecretKey();
    const stored = await store.insert({ accessKey: newAccessKey(), ...(name ? { name } : {}), parent, secretKeyEnc: this.box.seal(secretKey), scope });
    return { accessKey: stored.accessKey, secretKey, parent, scope };
  }

  /**
   * Make the scoped key named `name` (the operator's, one per ImageIndex) exactly this: this key pair
   * (the operator keeps it in a Secret it writes once), of `parent`, with `scope`. Idempotent, so that
   * every reconcile may ask again, and a store that lost the key gets it back. A name of another
   * parent's key, or a key id another key or user has, is a conflict.
   */
  async ensureScopedKey(name: string, parent: string, scope: KeyScope, key: { accessKey: string; secretKey: string }): Promise<{ created: boolean }> {
    const store = this.scopedStore();
    const existing = await store.getByName(name);
    if (existing && existing.parent !== parent) throw new ScopedKeyConflictError(`scoped key ${JSON.stringify(name)} belongs to another user`);
    if (existing && existing.accessKey === key.accessKey && this.box.open(existing.secretKeyEnc) === key.secretKey) {
      if (JSON.stringify(existing.scope) !== JSON.stringify(scope)) await store.setScope(existing.accessKey, scope);
      return { created: false };
    }
    if (await this.users.getByAccessKey(key.accessKey)) throw new ScopedKeyConflictError('that access key id is taken');
    if (!(await this.users.get(parent))) throw new S3Error('InvalidArgument', `user ${JSON.stringify(parent)} does not exist`);
    // Another key pair under this name (the Secret was made anew): the old one goes.
    if (existing) await store.delete(existing.accessKey);
    try {
      await store.insert({ accessKey: key.accessKey, name, parent, secretKeyEnc: this.box.seal(key.secretKey), scope });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ScopedKeyConflictError('that access key id or name is taken');
      throw err;
    }
    return { created: true };
  }

  /** The scoped keys of `parent`, without their secrets. */
  async listScopedKeys(parent: string): Promise<Array<Omit<StoredScopedKey, 'secretKeyEnc'>>> {
    return (await this.scopedStore().list(parent)).map(({ secretKeyEnc: _secret, ...key }) => key);
  }

  /** Delete a scoped key, by access key or (with `byName`) by the operator's name; `parent`, when given, must be its parent. */
  async deleteScopedKey(id: string, opts: { byName?: boolean; parent?: string } = {}): Promise<boolean> {
    const store = this.scopedStore();
    const key = opts.byName ? await store.getByName(id) : await store.getByAccessKey(id);
    if (!key || (opts.parent !== undefined && key.parent !== opts.parent)) return false;
    return store.delete(key.accessKey);
  }

  private scopedStore(): ScopedKeyStore {
    if (!this.scopedKeys) throw new S3Error('NotImplemented', 'scoped access keys are not kept here');
    return this.scopedKeys;
  }
}
