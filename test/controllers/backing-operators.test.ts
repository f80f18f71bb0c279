import { expect } from 'chai';
import { BucketReconciler } from '../../controllers/bucket/bucket-reconciler.js';
import { backingCredentials } from '../../controllers/bucket/stack-secrets.js';
import { stackIdentity } from '../../controllers/bucket/stack-identity.js';
import { eventually, mustGet, harnessHooks, stored, TEST_SETTINGS, type Doc, type Harness } from './support/harness.js';

const NS = 'operated';

/** A CRD as the database or broker operator's installation registers it (schema left open). */
const crd = (group: string, version: string, kind: string, plural: string) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
    versions: [
      {
        name: version,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
});
const CNPG_CRD = crd('postgresql.cnpg.io', 'v1', 'Cluster', 'clusters');
const RABBITMQ_CRD = crd('rabbitmq.com', 'v1beta1', 'RabbitmqCluster', 'rabbitmqclusters');

const platformUrl = (h: Harness, key: string) =>
  Buffer.from((mustGet(h.fake, 'v1', 'Secret', NS, 'strata-platform') as Doc).data[key], 'base64').toString('utf8');

/** The bundled PostgreSQL and RabbitMQ run by CloudNativePG and the RabbitMQ cluster operator where their CRDs exist. */
describe('Bucket stack on the database and broker operators', () => {
  const h = harnessHooks('each');

  const bucket = () => h.kube.apply({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'photos', namespace: NS }, spec: {} } as never);

  it('renders a CloudNativePG Cluster and a RabbitmqCluster instead of its own StatefulSets, with the stack\u2019s role and user', async () => {
    await h.kube.apply(CNPG_CRD as never);
    await h.kube.apply(RABBITMQ_CRD as never);
    h.start([new BucketReconciler(h.cached, h.events, TEST_SETTINGS)]);
    await bucket();
    const cluster = (await eventually(() => mustGet(h.fake, 'postgresql.cnpg.io/v1', 'Cluster', NS, 'strata-postgresql'), 'Cluster')) as Doc;
    const rabbit = (await eventually(() => mustGet(h.fake, 'rabbitmq.com/v1beta1', 'RabbitmqCluster', NS, 'strata-rabbitmq'), 'RabbitmqCluster')) as Doc;
    await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway'), 'stack');
    for (const name of ['strata-postgresql', 'strata-postgresql-replica', 'strata-rabbitmq'])
      expect(stored(h.fake, 'apps/v1', 'StatefulSet', NS, name), name).to.equal(undefined);

    const identity = stackIdentity(NS);
    const credentials = backingCredentials(mustGet(h.fake, 'v1', 'Secret', NS, 'strata-backing-credentials') as never);
    expect(cluster.spec.instances).to.equal(2);
    expect(cluster.spec.bootstrap.initdb).to.deep.include({ database: identity.database, owner: identity.role });
    const pgLogin = mustGet(h.fake, 'v1', 'Secret', NS, cluster.spec.bootstrap.initdb.secret.name) as Doc;
    expect(pgLogin.stringData).to.deep.equal({ username: identity.role, password: credentials.postgresPassword });
    const mqLogin = mustGet(h.fake, 'v1', 'Secret', NS, rabbit.spec.secretBackend.externalSecret.name) as Doc;
    expect(mqLogin.stringData).to.deep.equal({ username: identity.brokerUser, password: credentials.rabbitmqPassword });
    expect(cluster.metadata.ownerReferences.map((o: Doc) => o.name)).to.deep.equal(['photos']);

    // The services reach them through CloudNativePG's read-write and read-only Services and the broker's.
    expect(new URL(platformUrl(h, 'STRATA_PG_URL')).host).to.equal(`strata-postgresql-rw.${NS}.svc.cluster.local:5432`);
    expect(new URL(platformUrl(h, 'STRATA_PG_REPLICA_URLS')).host).to.equal(`strata-postgresql-ro.${NS}.svc.cluster.local:5432`);
    expect(new URL(platformUrl(h, 'STRATA_AMQP_URL')).host).to.equal(`strata-rabbitmq.${NS}.svc.cluster.local:5672`);
  });

  it('keeps the StatefulSets of a stack that runs its own servers when the operators\u2019 CRDs appear later', async () => {
    h.start([new BucketReconciler(h.kube, h.events, TEST_SETTINGS)]);
    await bucket();
    await eventually(() => mustGet(h.fake, 'apps/v1', 'StatefulSet', NS, 'strata-postgresql'), 'own PostgreSQL');
    await eventually(() => mustGet(h.fake, 'apps/v1', 'StatefulSet', NS, 'strata-rabbitmq'), 'own RabbitMQ');
    await h.kube.apply(CNPG_CRD as never);
    await h.kube.apply(RABBITMQ_CRD as never);
    // A change of the Bucket's spec reconciles the stack again, now with both APIs served.
    await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'photos' }, { spec: { deletionPolicy: 'Delete' } });
    await eventually(
      () => expect((stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, 'photos') as Doc).status?.observedGeneration).to.equal(2),
      'reconciled with the APIs served',
    );
    expect(stored(h.fake, 'postgresql.cnpg.io/v1', 'Cluster', NS, 'strata-postgresql')).to.equal(undefined);
    expect(stored(h.fake, 'rabbitmq.com/v1beta1', 'RabbitmqCluster', NS, 'strata-rabbitmq')).to.equal(undefined);
    expect(new URL(platformUrl(h, 'STRATA_PG_URL')).host).to.equal(`strata-postgresql.${NS}.svc.cluster.local:5432`);
  });

  it('keeps the recorded provider when the operators\u2019 CRDs go away: Degraded, never a new empty StatefulSet', async () => {
    await h.kube.apply(CNPG_CRD as never);
    await h.kube.apply(RABBITMQ_CRD as never);
    // The plain client: discovery is asked on every reconcile, so the CRDs' removal is seen at once.
    h.start([new BucketReconciler(h.kube, h.events, TEST_SETTINGS)]);
    await bucket();
    await eventually(() => mustGet(h.fake, 'postgresql.cnpg.io/v1', 'Cluster', NS, 'strata-postgresql'), 'Cluster');
    const config = (await eventually(() => mustGet(h.fake, 'v1', 'ConfigMap', NS, 'strata-config'), 'stack config')) as Doc;
    expect(JSON.parse(config.metadata.annotations['strata.dev/backing-providers'])).to.deep.equal({
      postgres: 'cloudnative-pg',
      rabbitmq: 'rabbitmq-operator',
    });

    for (const name of ['clusters.postgresql.cnpg.io', 'rabbitmqclusters.rabbitmq.com'])
      await h.kube.delete({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', namespace: '', name });
    await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'photos' }, { spec: { deletionPolicy: 'Delete' } });
    const degraded = await eventually(() => {
      const b = stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, 'photos') as Doc;
      const c = b.status?.conditions?.find((x: Doc) => x.type === 'Degraded');
      expect(c?.status, JSON.stringify(b.status)).to.equal('True');
      expect(c?.reason).to.equal('BackingProviderMissing');
      return c as Doc;
    }, 'Degraded');
    expect(degraded.message).to.contain('cloudnative-pg').and.contain('postgresql.cnpg.io/v1');
    for (const name of ['strata-postgresql', 'strata-postgresql-replica', 'strata-rabbitmq'])
      expect(stored(h.fake, 'apps/v1', 'StatefulSet', NS, name), name).to.equal(undefined);
    expect(new URL(platformUrl(h, 'STRATA_PG_URL')).host).to.equal(`strata-postgresql-rw.${NS}.svc.cluster.local:5432`);
  });
});
