import { expect } from 'chai';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';
import { ROOT, startObjectLayer, type ObjectLayer } from '../data-plane/harness.js';
import { internalPurge } from '../support/admin-jobs.js';

describe('events committed by the control plane are published at once, not at the relay retry', function () {
  this.timeout(60_000);
  let layer: ObjectLayer;
  const seen: StrataEvent[] = [];

  before(async () => {
    // A retry far beyond the test: whatever arrives was published because of a kick.
    layer = await startObjectLayer('pglite', { outboxRetryMs: 600_000 });
    await layer.broker.subscribe('test-observer', async (event) => {
      seen.push(event);
    });
  });
  after(async () => layer?.stop());

  const arrived = async (type: string, key?: string) => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const hit = seen.find((e) => e.type === type && (key === undefined || e.payload.key === key));
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`${type} ${key ?? ''} was not published within 10 s (seen: ${seen.map((e) => e.type).join(', ')})`);
  };

  it('publishes bucket.created, object.recycled, object.restored and object.purged right after the control plane commits them', async () => {
    expect((await layer.cpFetch('PUT', '/internal/buckets/kicked', { owner: ROOT.user })).status).to.equal(200);
    await arrived('bucket.created');
    const body = Buffer.from('kick me');
    expect((await layer.dpFetch('PUT', '/internal/objects/kicked/k', body, { 'content-length': String(body.length) })).status).to.equal(200);
    await arrived('object.created', 'k');
    expect((await layer.cpFetch('DELETE', '/internal/buckets/kicked/objects/k')).status).to.equal(204);
    expect((await arrived('object.recycled', 'k')).payload).to.include({ bucket: 'kicked', key: 'k' });
    const bin = (await (await layer.cpFetch('GET', '/internal/recycle-bin?bucket=kicked')).json()) as { objects: Array<{ id: number; key: string }> };
    expect(bin.objects.map((o) => o.key)).to.deep.equal(['k']);
    expect((await layer.cpFetch('POST', `/internal/recycle-bin/${bin.objects[0]!.id}/restore`, {})).status).to.equal(200);
    await arrived('object.restored', 'k');
    seen.length = 0;
    expect((await layer.cpFetch('DELETE', '/internal/buckets/kicked/objects/k')).status).to.equal(204);
    await arrived('object.recycled', 'k');
    const purge = await internalPurge(layer.cpFetch, { now: new Date(layer.clock.now.getTime() + 31 * 24 * 3600 * 1000).toISOString() });
    expect(purge.purged).to.equal(1);
    expect((await arrived('object.purged', 'k')).payload).to.include({ key: 'k' });
  });

  it('answers the kick route only with the internal token', async () => {
    const refused = await fetch(`${layer.dp.url}/internal/outbox/kick`, { method: 'POST' });
    expect(refused.status).to.equal(401);
    expect((await layer.dpFetch('POST', '/internal/outbox/kick')).status).to.equal(204);
  });
});
