import { expect } from 'chai';
import { BucketReconciler, BUCKET_FINALIZER } from '../../controllers/bucket/bucket-reconciler.js';
import { BackendRefusedError, HttpBucketService, type StackAccess } from '../../controllers/bucket/bucket-service.js';
import { renderFlowRulesConfigMap, renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets, secretValue } from '../../controllers/bucket/stack-secrets.js';
import { PURGE_SCHEDULE } from '../../controllers/bucket/stack-names.js';
import type { Bucket } from '../../controllers/api/index.js';
import {
  eventReasons,
  eventually,
  markDeploymentReady,
  markStackReady,
  mustGet,
  startHarness,
  stored,
  TEST_CREDENTIALS,
  TEST_SETTINGS,
  validateStored,
  type Doc,
  type Harness,
} from './support/harness.js';
import { RecordingControlPlane } from './support/recording-control-plane.js';
import { validateManifest } from './support/validate-manifest.js';

const NS = 'store';
const bucketCr = (name: string, spec: object) => ({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name, namespace: NS }, spec });
const getBucket = (h: Harness, name: string) => stored(h.fake, 'strata.dev/v1alpha1', 'Bucket', NS, name) as unknown as Bucket | undefined;

describe('Bucket reconciler', () => {
  describe('rendering the storage stack', () => {
    const owners = [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'a', uid: 'uid-a' }];
    const objects = renderStorageStack(NS, owners, TEST_SETTINGS, TEST_CREDENTIALS);

    it('renders schema-valid objects for every component', async () => {
      for (const o of [...objects, ...renderStackSecrets(NS), renderFlowRulesConfigMap(NS)]) await validateManifest(o);
      const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
      for (const expected of [
        'Deployment/strata-gateway',
        'Deployment/strata-data-plane',
        'Deployment/strata-control-plane',
        'Service/strata-gateway',
        'Service/strata-data-plane',
        'Service/strata-control-plane',
        'StatefulSet/strata-redis-0',
        'StatefulSet/strata-redis-1',
        'StatefulSet/strata-redis-2',
        'StatefulSet/strata-redis-5',
        'CronJob/strata-purge',
        'ConfigMap/strata-config',
        'Secret/strata-platform',
        'PersistentVolumeClaim/strata-data',
      ]) {
        expect(names).to.include(expected);
      }
    });

    it('schedules the purge at 03:00 and owns everything but the data volume', () => {
      const cron = objects.find((o) => o.kind === 'CronJob') as Doc;
      expect(cron.spec.schedule).to.equal(PURGE_SCHEDULE).and.equal('0 3 * * *');
      for (const o of objects) {
        if (o.kind === 'PersistentVolumeClaim') expect(o.metadata.ownerReferences).to.equal(undefined);
        else expect(o.metadata.ownerReferences, `${o.kind}/${o.metadata.name}`).to.deep.equal(owners);
      }
      const gateway = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-gateway') as Doc;
      expect(gateway.spec.template.spec.volumes[0].configMap.name).to.equal('strata-flow-control');
      const redisJob = objects.find((o) => o.kind === 'Job') as Doc;
      expect(redisJob.metadata.name).to.match(/^strata-redis-cluster-create-[0-9a-f]{10}$/);
      expect(redisJob.spec.template.spec.containers[0].command[2]).to.contain('--cluster-replicas 1');
    });
  });

  it('reads bucket statistics from the control plane, and counts objects where it keeps none', async () => {
    const cp = await new RecordingControlPlane('t'.repeat(32)).start();
    try {
      const service = new HttpBucketService({ namespace: NS, controlPlaneUrl: cp.url, rootUser: 'root', internalToken: 't'.repeat(32) });
      expect(await service.ensureBucket('b', { kind: 'fs' })).to.equal('created');
      expect(await service.ensureBucket('b', { kind: 'fs' })).to.equal('exists');
      cp.buckets.get('b')!.objects.push(...Array.from({ length: 2500 }, (_, i) => `k${i}`));
      expect(await service.stats('b')).to.deep.equal({ objectCount: 2500, bytes: 250_000 });
      expect(cp.calls.filter((c) => c.method === 'GET')).to.have.length(1);
      cp.withStats = false;
      expect(await service.stats('b')).to.deep.equal({ objectCount: 2500 });
      const s3 = { kind: 'minio' as const, bucket: 'x', accessKey: 'a', secretKey: 's' };
      expect(await service.ensureBucket('c', { ...s3, endpoint: 'http://refused:9000' }).catch((e: unknown) => e)).to.be.instanceOf(BackendRefusedError);
      const unreachable = await service.ensureBucket('c', { ...s3, endpoint: 'http://unreachable:9000' }).catch((e: unknown) => e);
      expect(unreachable).to.be.instanceOf(Error).and.not.be.instanceOf(BackendRefusedError);
      // Emptied one chunk (1 000 keys) per call, then deleted.
      expect(await service.deleteBucket('b')).to.deep.equal({ gone: false, objectsLeft: 1500 });
      expect(await service.deleteBucket('b')).to.deep.equal({ gone: false, objectsLeft: 500 });
      expect(await service.deleteBucket('b')).to.deep.equal({ gone: true });
      expect(cp.buckets.has('b')).to.equal(false);
      expect(await service.deleteBucket('b')).to.deep.equal({ gone: true });
    } finally {
      await cp.stop();
    }
  });

  describe('against the fake API server and a recording control plane', () => {
    let h: Harness;
    let cp: RecordingControlPlane | undefined;
    let accesses: StackAccess[];

    const startOperator = () => {
      h.start([
        new BucketReconciler(h.kube, h.events, TEST_SETTINGS, (access) => {
          accesses.push(access);
          // The real client, pointed at the test's server instead of the in-cluster Service.
          return new HttpBucketService({ ...access, controlPlaneUrl: cp!.url });
        }),
      ]);
    };
    const internalToken = () => secretValue(mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal') as never, 'STRATA_INTERNAL_TOKEN')!;

    beforeEach(async () => {
      accesses = [];
      cp = undefined;
      h = await startHarness();
      startOperator();
    });
    afterEach(async () => {
      await h.stop();
      await cp?.stop();
    });

    it('creates the stack, waits for it, creates the bucket with the root credentials and reports it', async () => {
      await h.kube.apply(bucketCr('photos', {}) as never);
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', 'store', 'strata-gateway'), 'stack created');
      await eventually(() => {
        const b = getBucket(h, 'photos')!;
        expect(b.status?.conditions?.find((c) => c.type === 'Progressing')?.reason).to.equal('WaitingForStorageStack');
        // No bucket in the object store yet: nothing for a finalizer to clean up.
        expect(b.metadata.finalizers).to.equal(undefined);
      }, 'waiting for the stack');
      expect(h.fake.state.list(h.fake.state.typeForKind('batch/v1', 'Job'), NS).map((j) => j.metadata.name)).to.satisfy((names: string[]) =>
        names.some((n) => n.startsWith('strata-redis-cluster-create-')),
      );
      for (const [kind, name] of [
        ['StatefulSet', 'strata-redis-5'],
        ['CronJob', 'strata-purge'],
      ] as const) {
        mustGet(h.fake, kind === 'StatefulSet' ? 'apps/v1' : 'batch/v1', kind, NS, name);
      }
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(() => {
        const b = getBucket(h, 'photos')!;
        expect(b.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True');
        expect(b.status?.endpoint).to.equal('http://strata-gateway.store.svc.cluster.local:9000/photos');
        expect(b.status?.objectCount).to.equal(0);
        expect(b.status?.bytes).to.equal(0);
        expect(b.status?.backingProviders).to.deep.equal({ postgres: 'statefulset', rabbitmq: 'statefulset' });
        expect(b.metadata.finalizers).to.deep.equal([BUCKET_FINALIZER]);
      }, 'bucket ready');
      const put = cp!.calls.find((c) => c.method === 'PUT')!;
      expect(put.path).to.equal('/internal/buckets/photos');
      expect(put.body).to.deep.equal({ owner: 'strata-root', backend: { kind: 'fs' } });
      expect(accesses[0]).to.include({ namespace: NS, rootUser: 'strata-root', controlPlaneUrl: 'http://strata-control-plane.store.svc.cluster.local:9002' });
      await eventually(() => expect(eventReasons(h.fake, NS, 'photos')).to.include.members(['BucketCreated', 'BucketReady']), 'events');
      // Everything the operator wrote, as the API server stores it, is schema-valid.
      expect(await validateStored(h.fake)).to.be.greaterThan(20);
    });

    it('never overwrites generated Secrets, and restores a deleted or edited Deployment', async () => {
      await h.kube.apply(bucketCr('photos', {}) as never);
      const secret = await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-root-credentials'), 'secret');
      const password = secretValue(secret as never, 'STRATA_ROOT_PASSWORD');
      expect(password).to.have.length.greaterThan(20);
      // A second Bucket triggers another reconcile of the stack.
      await h.kube.apply(bucketCr('logs', {}) as never);
      await eventually(() => {
        const cm = mustGet(h.fake, 'v1', 'ConfigMap', NS, 'strata-config');
        expect(cm.metadata.ownerReferences?.map((o) => o.name)).to.deep.equal(['logs', 'photos']);
      }, 'both buckets own the stack');
      expect(secretValue(mustGet(h.fake, 'v1', 'Secret', NS, 'strata-root-credentials') as never, 'STRATA_ROOT_PASSWORD')).to.equal(password);

      await h.kube.delete({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'strata-data-plane' });
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-data-plane'), 'data plane restored');
      await eventually(() => mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway'), 'gateway exists');
      await h.kube.mergePatch({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'strata-gateway' }, { spec: { replicas: 0 } });
      await eventually(
        () => expect((mustGet(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway') as Doc).spec.replicas).to.equal(1),
        'gateway replicas restored',
      );
    });

    it('passes backend credentials from Secrets, and reports missing ones as Degraded', async () => {
      await h.kube.apply(
        bucketCr('remote', {
          backend: {
            kind: 'minio',
            endpoint: 'http://minio:9000',
            region: 'eu-west-1',
            useSSL: false,
            pathStyle: true,
            accessKeySecretRef: { name: 'minio-creds', key: 'ak' },
            secretKeySecretRef: { name: 'minio-creds', key: 'sk' },
          },
        }) as never,
      );
      await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(
        () => expect(getBucket(h, 'remote')!.status?.conditions?.find((c) => c.type === 'Degraded')?.reason).to.equal('MissingCredentials'),
        'degraded',
      );
      const creds = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'minio-creds', namespace: NS }, stringData: { ak: 'AKID', sk: 'SECRET' } };
      await h.kube.apply(creds as never);
      // The Secret is not watched; any change to the Bucket (or the periodic requeue) picks it up.
      const touch = (value: string) =>
        h.kube.mergePatch(
          { apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'remote' },
          { metadata: { annotations: { touched: value } } },
        );
      await touch('yes');
      // Without the opt-in label the operator does not hand the Secret to a backend.
      await eventually(
        () =>
          expect(getBucket(h, 'remote')!.status?.conditions?.find((c) => c.type === 'Degraded')?.message).to.match(
            /lacks the label strata\.dev\/backend-credentials=true/,
          ),
        'unlabelled Secret refused',
      );
      expect(cp!.buckets.has('remote')).to.equal(false);
      await h.kube.apply({ ...creds, metadata: { ...creds.metadata, labels: { 'strata.dev/backend-credentials': 'true' } } } as never);
      await touch('again');
      await eventually(() => expect(getBucket(h, 'remote')!.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True'), 'ready');
      expect(cp!.buckets.get('remote')!.backend).to.deep.equal({
        kind: 'minio',
        endpoint: 'http://minio:9000',
        region: 'eu-west-1',
        bucket: 'remote',
        useSSL: false,
        pathStyle: true,
        accessKey: 'AKID',
        secretKey: 'SECRET',
      });
      // Settings the object store refuses leave the resource Degraded until its spec changes.
      const refs = { accessKeySecretRef: { name: 'minio-creds', key: 'ak' }, secretKeySecretRef: { name: 'minio-creds', key: 'sk' } };
      await h.kube.apply(bucketCr('refused', { backend: { kind: 'minio', endpoint: 'http://refused:9000', ...refs } }) as never);
      await eventually(
        () => expect(getBucket(h, 'refused')!.status?.conditions?.find((c) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'BackendRefused' }),
        'refused',
      );
      expect(cp!.buckets.has('refused')).to.equal(false);
    });

    it('follows an update of the deletion policy (Retain → Delete) and observes the new generation', async () => {
      await h.kube.apply(bucketCr('logs', { deletionPolicy: 'Retain' }) as never);
      await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(
        () => expect(getBucket(h, 'logs')!.status?.conditions?.find((c) => c.type === 'Ready')?.observedGeneration).to.equal(1),
        'ready at generation 1',
      );
      await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'logs' }, { spec: { deletionPolicy: 'Delete' } });
      await eventually(() => {
        const b = getBucket(h, 'logs')!;
        expect(b.status?.observedGeneration).to.equal(2);
        expect(b.status?.conditions?.find((c) => c.type === 'Ready')).to.include({ status: 'True', observedGeneration: 2 });
      }, 'generation 2 observed');
      await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'logs' });
      await eventually(() => expect(getBucket(h, 'logs')).to.equal(undefined), 'resource released');
      expect(cp!.buckets.has('logs')).to.equal(false);
    });

    it("keeps the bucket's lifecycle and CORS rules equal to spec.lifecycle / spec.cors (written only when they differ), and reports an invalid rule", async () => {
      const lifecycle = {
        rules: [
          { id: 'logs', prefix: 'logs/', expirationDays: 7 },
          { id: 'cutover', expirationDate: '2031-06-01', abortIncompleteMultipartUploadDays: 2, enabled: false },
        ],
      };
      const cors = { rules: [{ allowedOrigins: ['https://app.example'], allowedMethods: ['GET', 'PUT'], maxAgeSeconds: 600 }] };
      await h.kube.apply(bucketCr('aged', { lifecycle, cors }) as never);
      await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(() => expect(getBucket(h, 'aged')!.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True'), 'ready');
      expect(cp!.buckets.get('aged')!.lifecycle).to.deep.equal([
        { id: 'logs', enabled: true, filter: { form: 'filter', prefix: 'logs/', tags: [] }, expiration: { days: 7 } },
        {
          id: 'cutover',
          enabled: false,
          filter: { form: 'filter', prefix: '', tags: [] },
          expiration: { date: '2031-06-01T00:00:00.000Z' },
          abortIncompleteMultipartUploadDays: 2,
        },
      ]);
      expect(cp!.buckets.get('aged')!.cors).to.deep.equal([
        { allowedOrigins: ['https://app.example'], allowedMethods: ['GET', 'PUT'], allowedHeaders: [], exposeHeaders: [], maxAgeSeconds: 600 },
      ]);
      await eventually(() => expect(eventReasons(h.fake, NS, 'aged')).to.include.members(['LifecycleUpdated', 'CorsUpdated']), 'events');
      const writes = () => cp!.calls.filter((c) => /^\/internal\/buckets\/aged\/(lifecycle|cors)$/.test(c.path) && c.method !== 'GET').length;
      expect(writes()).to.equal(2);

      // Another reconcile (a label change) finds the rules in place and writes nothing.
      const reads = cp!.calls.filter((c) => c.path === '/internal/buckets/aged/lifecycle').length;
      await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'aged' }, { metadata: { labels: { touched: 'yes' } } });
      await eventually(
        () => expect(cp!.calls.filter((c) => c.path === '/internal/buckets/aged/lifecycle').length).to.be.greaterThan(reads),
        'reconciled again',
      );
      expect(writes()).to.equal(2);

      // An empty list removes the rules.
      await h.kube.mergePatch({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'aged' }, { spec: { lifecycle: { rules: [] } } });
      await eventually(() => expect(cp!.buckets.get('aged')!.lifecycle).to.equal(undefined), 'rules removed');
      expect(cp!.calls.filter((c) => c.path === '/internal/buckets/aged/lifecycle').map((c) => c.method)).to.include('DELETE');

      // A rule with two expirations is an invalid spec (the CRD's CEL rule refuses it in a real cluster).
      await h.kube.mergePatch(
        { apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'aged' },
        { spec: { lifecycle: { rules: [{ id: 'both', expirationDays: 1, expirationDate: '2031-01-01' }] } } },
      );
      await eventually(
        () => expect(getBucket(h, 'aged')!.status?.conditions?.find((c) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'InvalidSpec' }),
        'invalid spec',
      );
      expect(cp!.buckets.get('aged')!.lifecycle).to.equal(undefined);
    });

    it('releases a Delete-policy Bucket whose stack never came up, and holds one whose bucket exists until the stack is back', async () => {
      await h.kube.apply(bucketCr('never', { deletionPolicy: 'Delete' }) as never);
      await eventually(
        () => expect(getBucket(h, 'never')!.status?.conditions?.find((c) => c.type === 'Progressing')?.status).to.equal('True'),
        'waiting for the stack',
      );
      await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'never' });
      await eventually(() => expect(getBucket(h, 'never')).to.equal(undefined), 'released');

      await h.kube.apply(bucketCr('kept', { deletionPolicy: 'Delete' }) as never);
      await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(() => expect(getBucket(h, 'kept')!.status?.objectCount).to.equal(0), 'ready');
      // The gateway goes down; the bucket exists, so deletion waits for the stack.
      const t = h.fake.state.typeForKind('apps/v1', 'Deployment');
      h.fake.state.update(t, NS, 'strata-gateway', { ...h.fake.state.get(t, NS, 'strata-gateway'), status: { readyReplicas: 0 } }, 'status');
      await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'kept' });
      await eventually(() => expect(getBucket(h, 'kept')!.metadata.deletionTimestamp).to.be.a('string'), 'deleting');
      expect(cp.buckets.has('kept')).to.equal(true);
      markDeploymentReady(h.fake, NS, 'strata-gateway');
      await eventually(() => expect(getBucket(h, 'kept')).to.equal(undefined), 'released once the stack is back');
      expect(cp.buckets.has('kept')).to.equal(false);
    });

    it('lets only the oldest of two resources naming one bucket manage it, and keeps it for the other on deletion', async () => {
      await h.kube.apply(bucketCr('first', { bucketName: 'shared-data', deletionPolicy: 'Delete' }) as never);
      await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
      cp = await new RecordingControlPlane(internalToken()).start();
      await markStackReady(h.fake, NS);
      await eventually(() => expect(getBucket(h, 'first')!.status?.objectCount).to.equal(0), 'first ready');
      // Created later (the fake's timestamps have whole seconds: make the order unambiguous).
      await new Promise((r) => setTimeout(r, 1100));
      await h.kube.apply(bucketCr('second', { bucketName: 'shared-data' }) as never);
      await eventually(
        () => expect(getBucket(h, 'second')!.status?.conditions?.find((c) => c.type === 'Degraded')).to.include({ status: 'True', reason: 'BucketNameTaken' }),
        'second refused',
      );
      await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'first' });
      await eventually(() => expect(getBucket(h, 'first')).to.equal(undefined), 'first released');
      expect(cp.buckets.has('shared-data')).to.equal(true);
      expect(eventReasons(h.fake, NS, 'first')).to.include('BucketRetained');
      await h.kube.mergePatch(
        { apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'second' },
        { metadata: { annotations: { poke: '1' } } },
      );
      await eventually(() => expect(getBucket(h, 'second')!.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True'), 'second takes over');
    });

    for (const policy of ['Retain', 'Delete'] as const) {
      it(`on deletion with policy ${policy} ${policy === 'Delete' ? 'empties and deletes' : 'keeps'} the bucket, then releases the resource`, async () => {
        await h.kube.apply(bucketCr('data', { deletionPolicy: policy }) as never);
        await eventually(() => mustGet(h.fake, 'v1', 'Secret', NS, 'strata-internal'), 'stack secrets');
        cp = await new RecordingControlPlane(internalToken()).start();
        await markStackReady(h.fake, NS);
        await eventually(() => expect(cp!.buckets.has('data')).to.equal(true), 'bucket created');
        cp!.buckets.get('data')!.objects.push('a.txt', 'b/c.txt');
        await h.kube.delete({ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', namespace: NS, name: 'data' });
        await eventually(() => expect(getBucket(h, 'data')).to.equal(undefined), 'resource released');
        expect(cp!.buckets.has('data')).to.equal(policy === 'Retain');
        expect(cp!.calls.some((c) => c.method === 'DELETE')).to.equal(policy === 'Delete');
        expect(eventReasons(h.fake, NS, 'data')).to.include(policy === 'Delete' ? 'BucketDeleted' : 'BucketRetained');
        // The last Bucket took the stack with it, but not the data volume nor the Secrets.
        await eventually(() => expect(stored(h.fake, 'apps/v1', 'Deployment', NS, 'strata-gateway')).to.equal(undefined), 'stack collected');
        mustGet(h.fake, 'v1', 'Secret', NS, 'strata-root-credentials');
        mustGet(h.fake, 'v1', 'PersistentVolumeClaim', NS, 'strata-data');
      });
    }
  });
});
