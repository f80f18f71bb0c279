import { expect } from 'chai';
import { S3Error } from '../../images/object-model/src/index.js';
import { SqlUserStore } from '../../images/control-plane/src/metadata/users.js';
import { migrate } from '../../images/control-plane/src/schema/migrate.js';
import { UserService } from '../../images/control-plane/src/users/user-service.js';
import { createPgliteSqlClient, type SqlClient } from '../../images/service-kit/src/index.js';

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(S3Error);
  return { status: (err as S3Error).status, code: (err as S3Error).code };
};

/** Users' e-mail addresses (what S3's grants by e-mail name): optional, of an address's form, unique whatever their case. */
describe('control plane: users’ e-mail addresses', function () {
  this.timeout(60_000);
  let sql: SqlClient;
  let users: UserService;

  before(async () => {
    sql = await createPgliteSqlClient();
    await migrate(sql);
    users = new UserService(new SqlUserStore(sql), 'a-server-secret-for-tests-only');
  });
  after(() => sql?.close());

  it('a user may be created with an address or without one, and given, changed or relieved of one later', async () => {
    expect(await users.createUser('erin', 'erin-password', 'Erin@Example.com')).to.include({ username: 'erin', email: 'Erin@Example.com' });
    expect(await users.createUser('frank', 'frank-password')).not.to.have.property('email');
    expect(await users.userByEmail('erin@example.COM')).to.deep.equal({ username: 'erin', email: 'Erin@Example.com' });
    expect(await users.setEmail('frank', 'frank@example.com')).to.deep.equal({ username: 'frank', email: 'frank@example.com' });
    expect(await users.userByEmail('FRANK@example.com')).to.deep.equal({ username: 'frank', email: 'frank@example.com' });
    expect(await users.setEmail('frank', null)).to.deep.equal({ username: 'frank' });
    expect(await refusal(users.userByEmail('frank@example.com'))).to.deep.equal({ status: 400, code: 'UnresolvableGrantByEmailAddress' });
    // The user keeps its name and keys either way.
    expect((await users.verify('frank', 'frank-password')).username).to.equal('frank');
  });

  it('an address another user has, in any case, is 409 (creation or change), and nothing is created or changed', async () => {
    await users.createUser('gina', 'gina-password', 'gina@example.com');
    expect(await refusal(users.createUser('hank', 'hank-password', 'GINA@example.com'))).to.deep.equal({ status: 409, code: 'InvalidArgument' });
    expect(await refusal(users.verify('hank', 'hank-password'))).to.deep.equal({ status: 403, code: 'AccessDenied' });
    await users.createUser('hank', 'hank-password', 'hank@example.com');
    expect(await refusal(users.setEmail('hank', 'Gina@Example.com'))).to.deep.equal({ status: 409, code: 'InvalidArgument' });
    expect(await users.userByEmail('hank@example.com')).to.deep.equal({ username: 'hank', email: 'hank@example.com' });
    expect(await users.userByEmail('gina@example.com')).to.deep.equal({ username: 'gina', email: 'gina@example.com' });
    // A taken name is still told apart from a taken address.
    expect(await refusal(users.createUser('gina', 'gina-password', 'other@example.com'))).to.deep.equal({ status: 409, code: 'InvalidArgument' });
    // A user may keep its own address (any case), and many users have none.
    expect(await users.setEmail('gina', 'GINA@example.com')).to.deep.equal({ username: 'gina', email: 'GINA@example.com' });
  });

  it('refuses what is not an address, and a change of a user that does not exist', async () => {
    for (const bad of ['', 'no-at-sign', 'two@@example.com', 'space @example.com', 'a@nodot', 'a@-bad.com', `${'x'.repeat(250)}@example.com`, 42]) {
      expect(await refusal(users.createUser('ivan', 'ivan-password', bad)), String(bad)).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    }
    expect(await refusal(users.setEmail('nobody', 'nobody@example.com'))).to.deep.equal({ status: 400, code: 'InvalidArgument' });
    expect(await refusal(users.userByEmail('not an address'))).to.deep.equal({ status: 400, code: 'UnresolvableGrantByEmailAddress' });
  });

  it('a database migrated before 0009 keeps its users, who have no address until one is given', async () => {
    const old = await createPgliteSqlClient();
    try {
      await migrate(old);
      // As a build before 0009 left it: no column, no record of the migration.
      await old.exec(`DROP INDEX users_email_key; ALTER TABLE users DROP COLUMN email; DELETE FROM schema_migrations WHERE version = '0009_user_email'`);
      await old.query(`INSERT INTO users (username, password_hash, access_key, secret_key_enc) VALUES ('olga', 'x', 'OLGAKEY', 'y')`);
      expect(await migrate(old)).to.deep.equal(['0009_user_email']);
      const store = new SqlUserStore(old);
      expect(await store.get('olga'))
        .to.include({ username: 'olga', accessKey: 'OLGAKEY' })
        .and.not.to.have.property('email');
      const service = new UserService(store, 'a-server-secret-for-tests-only');
      await service.setEmail('olga', 'olga@example.com');
      expect(await service.userByEmail('OLGA@example.com')).to.deep.equal({ username: 'olga', email: 'olga@example.com' });
    } finally {
      await old.close();
    }
  });
});
