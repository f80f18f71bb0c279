import { expect } from 'chai';
import { eventually, startHarness, stored, type Harness } from '../controllers/support/harness.js';

const NS = 'store';
const LIST_PATH = '/apis/apps/v1/deployments';

const deployment = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', namespace: NS },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: 'web' } },
    template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] } },
  },
};
const ref = { apiVersion: 'apps/v1', kind: 'Deployment', namespace: NS, name: 'web' };

describe('informer relists', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    h.informers.stop();
    await h.stop();
  });

  it('never lay an older list over a newer deletion, so the cached apply re-creates what was deleted', async () => {
    const informer = h.informers.informerFor({ apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments' });
    await h.informers.start();
    await h.cached.apply(deployment as never);
    await eventually(() => expect(informer.get(NS, 'web')).to.not.equal(undefined), 'the Deployment in the cache');

    // The resync's list is read while the Deployment exists, and answered only after its deletion was watched.
    let hold = true;
    h.fake.holdListAnswers = (path) => hold && path === LIST_PATH;
    const lists = () => h.fake.requests.filter((r) => r === `GET ${LIST_PATH}`).length;
    const before = lists();
    const resync = h.informers.resync();
    await eventually(() => expect(lists()).to.be.above(before), 'the relist sent');
    await h.kube.delete(ref);
    await eventually(() => expect(informer.get(NS, 'web')).to.equal(undefined), 'the deletion watched');
    hold = false;
    await resync;

    await eventually(() => expect(informer.get(NS, 'web')).to.equal(undefined), 'the deletion kept after the relist');
    await h.cached.apply(deployment as never);
    expect(stored(h.fake, 'apps/v1', 'Deployment', NS, 'web'), 'the Deployment re-created').to.not.equal(undefined);
  });

  it('keeps watching after a relist: later changes reach the cache', async () => {
    const informer = h.informers.informerFor({ apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments' });
    await h.informers.start();
    await h.informers.resync();
    await h.kube.apply(deployment as never);
    await eventually(() => expect(informer.get(NS, 'web')).to.not.equal(undefined), 'created after the relist');
    await h.kube.delete(ref);
    await eventually(() => expect(informer.get(NS, 'web')).to.equal(undefined), 'deleted after the relist');
  });
});
