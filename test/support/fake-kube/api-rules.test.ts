import { expect } from 'chai';
import { ClusterState, type KubeObject } from './cluster-state.js';

const obj = (apiVersion: string, kind: string, name: string, rest: object = {}) => ({ apiVersion, kind, metadata: { name }, ...rest }) as unknown as KubeObject;
const status = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as { code?: number }).code;
  }
  return 200;
};

describe('fake API server: what a real one refuses', () => {
  let state: ClusterState;
  beforeEach(() => {
    state = new ClusterState();
  });
  const t = (apiVersion: string, kind: string) => state.typeForKind(apiVersion, kind);

  it('checks names: DNS-1123, Services DNS-1035 within 63, Jobs 63, CronJobs 52', () => {
    expect(status(() => state.create(t('v1', 'ConfigMap'), 'ns', obj('v1', 'ConfigMap', 'Bad_Name')))).to.equal(422);
    expect(status(() => state.create(t('v1', 'Service'), 'ns', obj('v1', 'Service', `s${'x'.repeat(63)}`)))).to.equal(422);
    expect(status(() => state.create(t('v1', 'Service'), 'ns', obj('v1', 'Service', '1abc')))).to.equal(422);
    expect(status(() => state.create(t('v1', 'Service'), 'ns', obj('v1', 'Service', 'x'.repeat(63))))).to.equal(200);
    expect(status(() => state.create(t('batch/v1', 'Job'), 'ns', obj('batch/v1', 'Job', 'j'.repeat(64))))).to.equal(422);
    expect(status(() => state.create(t('batch/v1', 'CronJob'), 'ns', obj('batch/v1', 'CronJob', 'c'.repeat(53))))).to.equal(422);
    expect(status(() => state.create(t('v1', 'ConfigMap'), 'ns', obj('v1', 'ConfigMap', 'a.b-c')))).to.equal(200);
  });

  it('refuses changes to immutable fields and shrinking a claim', () => {
    const job = state.create(
      t('batch/v1', 'Job'),
      'ns',
      obj('batch/v1', 'Job', 'j', { spec: { template: { spec: { containers: [{ name: 'a', image: 'x' }] } } } }),
    );
    const changed = { ...job, spec: { template: { spec: { containers: [{ name: 'a', image: 'y' }] } } } };
    expect(status(() => state.update(t('batch/v1', 'Job'), 'ns', 'j', changed))).to.equal(422);
    const pvc = state.create(
      t('v1', 'PersistentVolumeClaim'),
      'ns',
      obj('v1', 'PersistentVolumeClaim', 'p', { spec: { storageClassName: 'fast', resources: { requests: { storage: '10Gi' } } } }),
    );
    const withStorage = (storage: string, storageClassName = 'fast') =>
      ({
        ...pvc,
        metadata: { ...pvc.metadata, resourceVersion: undefined },
        spec: { storageClassName, resources: { requests: { storage } } },
      }) as unknown as KubeObject;
    expect(status(() => state.update(t('v1', 'PersistentVolumeClaim'), 'ns', 'p', withStorage('5Gi')))).to.equal(422);
    expect(status(() => state.update(t('v1', 'PersistentVolumeClaim'), 'ns', 'p', withStorage('10Gi', 'slow')))).to.equal(422);
    expect(status(() => state.update(t('v1', 'PersistentVolumeClaim'), 'ns', 'p', withStorage('20Gi')))).to.equal(200);
    const sts = state.create(
      t('apps/v1', 'StatefulSet'),
      'ns',
      obj('apps/v1', 'StatefulSet', 's', { spec: { selector: { matchLabels: { a: '1' } }, serviceName: 's' } }),
    );
    expect(
      status(() => state.update(t('apps/v1', 'StatefulSet'), 'ns', 's', { ...sts, spec: { selector: { matchLabels: { a: '2' } }, serviceName: 's' } })),
    ).to.equal(422);
  });

  it('terminates a namespace: content deleted, finalizers block, no new content, the namespace goes when empty', async () => {
    state.create(t('v1', 'Namespace'), undefined, obj('v1', 'Namespace', 'ns'));
    state.create(t('v1', 'ConfigMap'), 'ns', obj('v1', 'ConfigMap', 'plain'));
    state.create(t('v1', 'ConfigMap'), 'ns', { ...obj('v1', 'ConfigMap', 'held'), metadata: { name: 'held', finalizers: ['x/y'] } } as unknown as KubeObject);
    state.create(t('v1', 'ConfigMap'), 'other', obj('v1', 'ConfigMap', 'elsewhere'));
    state.delete(t('v1', 'Namespace'), undefined, 'ns');
    const ns = state.get(t('v1', 'Namespace'), undefined, 'ns');
    expect((ns.status as { phase: string }).phase).to.equal('Terminating');
    expect(state.tryGet(t('v1', 'ConfigMap'), 'ns', 'plain')).to.equal(undefined);
    const held = state.get(t('v1', 'ConfigMap'), 'ns', 'held');
    expect(held.metadata.deletionTimestamp).to.be.a('string');
    expect(status(() => state.create(t('v1', 'ConfigMap'), 'ns', obj('v1', 'ConfigMap', 'new')))).to.equal(403);
    state.update(t('v1', 'ConfigMap'), 'ns', 'held', { ...held, metadata: { ...held.metadata, finalizers: [] } });
    expect(state.tryGet(t('v1', 'Namespace'), undefined, 'ns')).to.equal(undefined);
    expect(state.tryGet(t('v1', 'ConfigMap'), 'other', 'elsewhere')).to.not.equal(undefined);
  });
});
