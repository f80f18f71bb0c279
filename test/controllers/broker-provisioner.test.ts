import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import amqp from 'amqplib';
import { managementUrlOf, RabbitmqManagementProvisioner, BrokerProvisioningError } from '../../controllers/bucket/broker-provisioner.js';
import { backingUrls } from '../../controllers/bucket/render-backing-services.js';
import { stackIdentity } from '../../controllers/bucket/stack-identity.js';
import { TEST_SETTINGS } from './support/harness.js';

const ADMIN_AMQP_URL = process.env.STRATA_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const MANAGEMENT_URL = managementUrlOf(ADMIN_AMQP_URL);

/** Delete what a test created (the management API with the administrator's credentials). */
async function remove(path: string): Promise<void> {
  const url = new URL(MANAGEMENT_URL);
  const auth = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  await fetch(new URL(`api/${path}`, `${url.origin}/`), { method: 'DELETE', headers: { authorization: auth } });
}

/**
 * An external RabbitMQ shared by namespaces: the operator creates each one's user and vhost through
 * the management API (the local RabbitMQ; .ci/run enables its management plugin), and each
 * namespace's URL reaches only its own vhost.
 */
describe('per-namespace users and vhosts on an external RabbitMQ', function () {
  this.timeout(60_000);
  const run = randomBytes(3).toString('hex');
  const namespaces = [`north-${run}`, `south-${run}`];
  const settings = { ...TEST_SETTINGS, postgresUrl: 'postgres://admin:secret@db:5432/postgres', amqpUrl: ADMIN_AMQP_URL };

  before(async function () {
    const reachable = await fetch(new URL('api/overview', MANAGEMENT_URL.replace(/\/\/[^@]*@/, '//')), { signal: AbortSignal.timeout(3000) }).then(
      () => true,
      () => false,
    );
    if (!reachable) {
      console.warn(`skipped: no RabbitMQ management API at ${new URL(MANAGEMENT_URL).host} (rabbitmq-plugins enable rabbitmq_management; .ci/run does)`);
      this.skip();
    }
  });
  after(async () => {
    for (const ns of namespaces) {
      await remove(`vhosts/${encodeURIComponent(`strata-${ns}`)}`);
      await remove(`users/${encodeURIComponent(`strata-${ns}`)}`);
    }
  });

  it("lets each namespace's URL into its own vhost only, again and again, with no administrator credential in it", async () => {
    const provisioner = new RabbitmqManagementProvisioner(MANAGEMENT_URL);
    const urls = new Map<string, string>();
    for (const ns of namespaces) {
      const password = randomBytes(18).toString('base64url');
      await provisioner.ensure(stackIdentity(ns), password);
      await provisioner.ensure(stackIdentity(ns), password); // idempotent
      const url = backingUrls(ns, settings, stackIdentity(ns), { postgresPassword: 'p', rabbitmqPassword: password }).amqpUrl;
      expect(url).to.not.contain('guest');
      urls.set(ns, url);
    }
    const [north, south] = namespaces.map((ns) => urls.get(ns)!);
    const conn = await amqp.connect(north!);
    try {
      const ch = await conn.createChannel();
      await ch.assertExchange(`strata.${namespaces[0]}.events`, 'topic', { durable: false, autoDelete: true });
      await ch.close();
    } finally {
      await conn.close();
    }
    // North's user and password against south's vhost, and the administrator's default vhost: refused.
    const southVhost = new URL(south!).pathname;
    for (const vhost of [southVhost, '/%2F']) {
      const intruder = new URL(north!);
      intruder.pathname = vhost;
      const refused = await amqp.connect(intruder.toString()).then(
        async (c) => (await c.close(), 'connected'),
        (err: Error) => err.message,
      );
      // amqplib reports the broker's connection.close (NOT_ALLOWED, access to vhost refused) in place of open-ok.
      expect(refused, `north's user into ${vhost}`).to.match(/Expected ConnectionOpenOk|NOT_ALLOWED|ACCESS_REFUSED/);
    }
  });

  it('reports a management API that refuses the administrator credentials as a clear error', async () => {
    const wrong = new URL(MANAGEMENT_URL);
    wrong.password = 'not-the-password';
    const err = await new RabbitmqManagementProvisioner(wrong.toString()).ensure(stackIdentity(namespaces[0]!), 'x').catch((e: unknown) => e);
    expect(err).to.be.instanceOf(BrokerProvisioningError);
    expect((err as Error).message)
      .to.match(/answered 401/)
      .and.not.contain('not-the-password');
  });
});
