import { SecretBox, isUniqueViolation } from '../../../service-kit/src/index.js';
import { S3Error, USER_NAME } from '../../../object-model/src/index.js';
import type { UserStore } from '../metadata/store.js';
import { hashPassword, newAccessKey, newSecretKey, verifyPassword } from './credentials.js';

export interface Credentials {
  username: string;
  accessKey: string;
  secretKey: string;
}

/** "409 InvalidArgument" as the internal API names it for a taken user name. */
class UserExistsError extends S3Error {
  override readonly status = 409;
  constructor(username: string) {
    super('InvalidArgument', `user ${JSON.stringify(username)} already exists`);
  }
}

/** Users and their credentials: scrypt password hashes, SigV4 secrets sealed with the server key. */
export class UserService {
  private readonly box: SecretBox;

  constructor(
    private readonly users: UserStore,
    serverSecret: string,
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

  async credentials(accessKey: string): Promise<Credentials> {
    const user = await this.users.getByAccessKey(accessKey);
    if (!user) throw new S3Error('InvalidAccessKeyId');
    return { username: user.username, accessKey: user.accessKey, secretKey: this.box.open(user.secretKeyEnc) };
  }
}
