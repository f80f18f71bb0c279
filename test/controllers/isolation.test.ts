import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { PgDatabaseProvisioner } from '../../controllers/bucket/database-provisioner.js';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { stackIdentity } from '../../controllers/bucket/stack-identity.js';
import { secretValue } from '../../controllers/bucket/stack-secrets.js';
import { renderImageIndex } from '../../controllers/image-index/render-image-index.js';
import { imageIndexSpec, type ImageIndex } from '../../controllers/api/index.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { eventually, mustGet, harnessHooks, TEST_SETTINGS, validateStored, type Doc } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

const PG_ADMIN_URL = process.env.STRATA_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const owners = (ns: string) => [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'photos', uid: `uid-${ns}` }];
const creds = (ns: string) => ({ postgresPassword: `pg-${ns}`, rabbitmqPassword: `mq-${ns}` });

/** What a stack's services connect with: the decoded platform Secret and the shared ConfigMap. */
function connections(objects: Manifest[]): Record<string, string> {
  const platform = objects.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-platform') as Doc;
  const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config') as Doc;
  const decoded: Record<string, string> = Object.fromEntries(
    Object.entries(platform.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
  );
  return { ...decoded, exchange: config.data.STRATA_AMQP_EXCHANGE as string, queuePrefix: config.data.STRATA_AMQP_QUEUE_PREFIX as string };
}

describe('one isolated stack per namespace', () => {
  for (const mode of ['bundled', 'external'] as const) {
    it(`gives a Bucket photos in two namespaces disjoint databases, roles, queues and secrets (${mode} servers)`, async () => {
      const settings =
        mode === 'bundled'
          ? TEST_SETTINGS
          : {
              ...TEST_SETTINGS,
              postgresUrl: 'postgres://admin:secret@db:5432/postgres',
              postgresReplicaUrls: ['postgres://admin:secret@db-r:5432/postgres'],
              amqpUrl: 'amqp://admin:secret@mq:5672',
            };
      const a = renderStorageStack('north', owners('north'), settings, creds('north'));
      const b = renderStorageStack('south', owners('south'), settings, creds('south'));
      for (const o of [...a, ...b]) await validateManifest(o);
      const ca = connections(a);
      const cb = connections(b);
      const pgA = new URL(ca.STRATA_PG_URL!);
      const pgB = new URL(cb.STRATA_PG_URL!);
      expect(pgA.pathname).to.equal('/strata_north');
      expect(pgB.pathname).to.equal('/strata_south');
      expect([pgA.username, pgA.password]).to.deep.equal(['strata_north', 'pg-north']);
      expect([pgB.username, pgB.password]).to.deep.equal(['strata_south', 'pg-south']);
      for (const replica of [ca.STRATA_PG_REPLICA_URLS!, cb.STRATA_PG_REPLICA_URLS!]) expect(replica).to.be.a('string');
      expect(new URL(ca.STRATA_PG_REPLICA_URLS!).pathname).to.equal('/strata_north');
      expect([ca.exchange, ca.queuePrefix]).to.deep.equal(['strata.north.events', 'north.']);
      expect([cb.exchange, cb.queuePrefix]).to.deep.equal(['strata.south.events', 'south.']);
      // The administrator's credentials never reach a namespace.
      expect(JSON.stringify([ca, cb])).to.not.contain('admin:secret');
      if (mode === 'bundled') {
        // Each namespace's URLs point at servers in that namespace, with its own broker password.
        expect(pgA.hostname).to.equal('strata-postgresql.north.svc.cluster.local');
        expect(ca.STRATA_AMQP_URL).to.equal('amqp://strata:mq-north@strata-rabbitmq.north.svc.cluster.local:5672');
        expect(a.filter((o) => o.kind === 'StatefulSet').map((o) => o.metadata.name)).to.include.members([
          'strata-postgresql',
          'strata-postgresql-replica',
          'strata-rabbitmq',
        ]);
      } else {
        expect(a.some((o) => o.metadata.name.startsWith('strata-postgresql') || o.metadata.name === 'strata-rabbitmq')).to.equal(false);
        // The shared broker: each namespace its own user and vhost (the operator creates them), never the administrator's URL.
        expect(ca.STRATA_AMQP_URL).to.equal('amqp://strata-north:mq-north@mq:5672/strata-north');
        expect(cb.STRATA_AMQP_URL).to.equal('amqp://strata-south:mq-south@mq:5672/strata-south');
      }
      // Nothing one namespace's stack is rendered with names the other namespace.
      expect(JSON.stringify(a)).to.not.match(/south/);
      expect(JSON.stringify(b)).to.not.match(/north/);
    });
  }

  it('keeps derived PostgreSQL names within 63 bytes and distinct for long namespaces', () => {
    const long = (c: string) => `${'n'.repeat(60)}-${c}`;
    const x = stackIdentity(long('x'));
    const y = stackIdentity(long('y'));
    expect(x.database.length).to.be.at.most(63);
    expect(x.database).to.not.equal(y.database);
    expect(stackIdentity('a-b').database).to.not.equal(stackIdentity('a-c').database);
  });

  it("listens for object events on the namespace's own exchange in index workers", () => {
    const spec = { source: { bucket: 'photos' }, model: { directory: '/m' } };
    const ix = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name: 'ix', namespace: 'north', uid: 'u' }, spec } as unknown as ImageIndex;
    const env = (renderImageIndex(ix, imageIndexSpec.parse(spec), TEST_SETTINGS).find((o) => o.kind === 'Deployment') as Doc).spec.template.spec.containers[0]
      .env as Array<{ name: string; value?: string }>;
    expect(env.find((e) => e.name === 'IMAGE_SEARCH_EVENTS_EXCHANGE')?.value).to.equal('strata.north.events');
  });

  describe('reconciled against the fake API server', () => {
    const h = harnessHooks('suite', (h) => h.start([new BucketReconciler(h.kube, h.events, TEST_SETTINGS)]));

    it("generates each namespace's own root user, keys and backing passwords, and wires them into its URLs only", async () => {
      for (const ns of ['north', 'south'])
        await h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'photos', namespace: ns }, spec: {} } as never);
      const secretsOf = (ns: string) =>
        eventually(() => {
          const read = (name: string, key: string) => secretValue(mustGet(h.fake, 'v1', 'Secret', ns, name) as never, key)!;
          return {
            rootPassword: read('strata-root-credentials', 'STRATA_ROOT_PASSWORD'),
            secretKey: read('strata-internal', 'STRATA_SECRET_KEY'),
            internalToken: read('strata-internal', 'STRATA_INTERNAL_TOKEN'),
            postgresPassword: read('strata-backing-credentials', 'POSTGRES_PASSWORD'),
            pgUrl: read('strata-platform', 'STRATA_PG_URL'),
            amqpUrl: read('strata-platform', 'STRATA_AMQP_URL'),
          };
        }, `stack of ${ns}`);
      for (const ns of ['north', 'south']) await eventually(() => mustGet(h.fake, 'batch/v1', 'CronJob', ns, 'strata-purge'), `stack of ${ns} applied`);
      const a = await secretsOf('north');
      const b = await secretsOf('south');
      for (const key of Object.keys(a) as Array<keyof typeof a>) expect(a[key], key).to.not.equal(b[key]);
      expect(new URL(a.pgUrl).password).to.equal(a.postgresPassword);
      expect(new URL(b.pgUrl).password).to.equal(b.postgresPassword);
      expect(await validateStored(h.fake)).to.be.greaterThan(40);
    });
  });

  describe('on an external PostgreSQL server', function () {
    this.timeout(20_000);
    const suffix = randomBytes(3).toString('hex');
    const namespaces = [`iso-a-${suffix}`, `iso-b-${suffix}`];
    const admin = new pg.Pool({ connectionString: PG_ADMIN_URL, max: 1 });
    const provisioner = new PgDatabaseProvisioner(PG_ADMIN_URL);
    after(async () => {
      for (const ns of namespaces) {
        const id = stackIdentity(ns);
        await admin.query(`DROP DATABASE IF EXISTS "${id.database}"`);
        await admin.query(`DROP ROLE IF EXISTS "${id.role}"`);
      }
      await provisioner.close();
      await admin.end();
    });

    it("creates each namespace's role and database, which no other role may connect to; again and again", async () => {
      for (const ns of namespaces) {
        await provisioner.ensure(stackIdentity(ns), 'first');
        await provisioner.ensure(stackIdentity(ns), 'second');
      }
      const [a, b] = namespaces.map(stackIdentity) as [ReturnType<typeof stackIdentity>, ReturnType<typeof stackIdentity>];
      const owner = await admin.query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [a.database]);
      expect(owner.rows[0].owner).to.equal(a.role);
      const can = async (role: string, db: string) =>
        (await admin.query('SELECT has_database_privilege($1, $2, $3) AS ok', [role, db, 'CONNECT'])).rows[0].ok as boolean;
      expect(await can(a.role, a.database)).to.equal(true);
      expect(await can(b.role, b.database)).to.equal(true);
      expect(await can(a.role, b.database)).to.equal(false);
      expect(await can(b.role, a.database)).to.equal(false);
    });

    it('sets the password only when it changed, not on every reconcile', async () => {
      const id = stackIdentity(namespaces[0]!);
      // Each ALTER ROLE … PASSWORD stores a new SCRAM verifier (fresh salt): an unchanged one means no ALTER.
      const verifier = async () => (await admin.query('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [id.role])).rows[0].rolpassword as string;
      await provisioner.ensure(id, 'third');
      const set = await verifier();
      await provisioner.ensure(id, 'third');
      await provisioner.ensure(id, 'third');
      expect(await verifier()).to.equal(set);
      await provisioner.ensure(id, 'fourth');
      expect(await verifier()).to.not.equal(set);
      const login = new pg.Client({ connectionString: PG_ADMIN_URL, user: id.role, password: 'fourth', database: id.database });
      await login.connect();
      await login.end();
    });
  });
});
