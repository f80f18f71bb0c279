import { SecretBox, isUniqueViolation } from '../../../service-kit/src/index.js';
import { ConflictError, S3Error, unresolvableEmail, USER_EMAIL, USER_NAME, type KeyScope, type ScopedKeyCredentials } from '../../../object-model/src/index.js';
import type { ScopedKeyStore, StoredScopedKey, UserStore } from '../metadata/store.js';
import { hashPassword, newAccessKey, newSecretKey, verifyPassword } from './credentials.js';

export interface Credentials {
  username: string;
  accessKey: string;
  secretKey: string;
  /** A scoped key's limits (its `username` is its parent's); absent for a user's own key. */
  scope?: KeyScope;
  /** A new user's e-mail address, when it was given one. */
  email?: string;
}

/** A user as shown (never its secrets). */
export interface UserView {
  username: string;
  email?: string;
}

const userExists = (username: string) => new ConflictError(`user ${JSON.stringify(username)} already exists`);
/** An e-mail address another user has (whatever its case). */
const emailTaken = (email: string) => new ConflictError(`the e-mail address ${JSON.stringify(email)} belongs to another user`);

/** An e-mail address as a user may have one; InvalidArgument otherwise. */
function checkedEmail(email: unknown): string {
  if (typeof email !== 'string' || !USER_EMAIL.test(email))
    throw new S3Error('InvalidArgument', 'email: an e-mail address (name@domain), at most 254 characters');
  return email;
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

  async createUser(username: unknown, password: unknown, email?: unknown): Promise<Credentials> {
    if (typeof username !== 'string' || !USER_NAME.test(username)) {
      throw new S3Error('InvalidArgument', 'username: 3 to 64 characters of letters, digits and . _ @ + -, starting with a letter or digit');
    }
    if (typeof password !== 'string' || password.length < 8 || password.length > 256) {
      throw new S3Error('InvalidArgument', 'password: 8 to 256 characters');
    }
    const address = email === undefined ? undefined : checkedEmail(email);
    const secretKey = newSecretKey();
    const accessKey = newAccessKey();
    try {
      await this.users.insert({
        username,
        passwordHash: await hashPassword(password),
        accessKey,
        secretKeyEnc: this.box.seal(secretKey),
        ...(address ? { email: address } : {}),
      });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Which one was taken: the name (the insert's own conflict) or the address (the index's).
      if (address && !(await this.users.get(username))) throw emailTaken(address);
      throw userExists(username);
    }
    return { username, accessKey, secretKey, ...(address ? { email: address } : {}) };
  }

  /** Give a user an e-mail address, or (null) take it away; InvalidArgument for no such user, 409 for a taken address. */
  async setEmail(username: string, email: unknown): Promise<UserView> {
    const address = email === null ? null : checkedEmail(email);
    let changed;
    try {
      changed = await this.users.setEmail(username, address);
    } catch (err) {
      if (isUniqueViolation(err) && address) throw emailTaken(address);
      throw err;
    }
    if (!changed) throw new S3Error('InvalidArgument', `user ${JSON.stringify(username)} does not exist`);
    return { username, ...(address ? { email: address } : {}) };
  }

  /** The user an e-mail address names (whatever its case): what a grant by e-mail address is kept as. */
  async userByEmail(email: string): Promise<UserView> {
    const user = USER_EMAIL.test(email) ? await this.users.getByEmail(email) : undefined;
    if (!user) throw unresolvableEmail(email);
    return { username: user.username, email: user.email! };
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
    if (existing && existing.parent !== parent) throw new ConflictError(`scoped key ${JSON.stringify(name)} belongs to another user`);
    if (existing && existing.accessKey === key.accessKey && this.box.open(existing.secretKeyEnc) === key.secretKey) {
      if (JSON.stringify(existing.scope) !== JSON.stringify(scope)) await store.setScope(existing.accessKey, scope);
      return { created: false };
    }
    if (await this.users.getByAccessKey(key.accessKey)) throw new ConflictError('that access key id is taken');
    if (!(await this.users.get(parent))) throw new S3Error('InvalidArgument', `user ${JSON.stringify(parent)} does not exist`);
    // Another key pair under this name (the Secret was made anew): the old one goes.
    if (existing) await store.delete(existing.accessKey);
    try {
      await store.insert({ accessKey: key.accessKey, name, parent, secretKeyEnc: this.box.seal(key.secretKey), scope });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError('that access key id or name is taken');
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
