import { expect } from 'chai';
import { createLogger, createRegistry } from '../../images/service-kit/src/index.js';
import { AccessLogDelivery } from '../../images/gateway/src/access-log/delivery.js';
import type { BucketInfo, ObjectLayer } from '../../images/object-model/src/index.js';

const bucket = (name: string, owner: string): BucketInfo => ({ name, owner, createdAt: new Date().toISOString(), backend: { kind: 'fs' } });

/** The delivery's shutdown against a target whose writes never end (a data plane that stopped answering). */
describe('gateway: access-log delivery at shutdown', () => {
  it('waits for a stuck write only so long: the stop goes on, the lines are not claimed written', async () => {
    const registry = createRegistry('access-log-test', false);
    const writes: string[] = [];
    const stuck = { putObject: (_b: string, key: string) => (writes.push(key), new Promise(() => undefined)) } as unknown as ObjectLayer;
    const delivery = new AccessLogDelivery(
      stuck,
      async (name) => bucket(name, 'alice'),
      'us-east-1',
      { flushMs: 3_600_000, flushLines: 1000, bufferLines: 10 },
      createLogger('t', 'silent'),
      registry,
    );
    delivery.record(bucket('src', 'alice'), { targetBucket: 'logs', targetPrefix: 'p/' }, 'a line', new Date());
    await delivery.close(50); // (returns although the write never ends)
    expect(writes).to.have.length(1);
    expect(writes[0]).to.match(/^p\/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/);
    const metrics = await registry.getSingleMetricAsString('strata_gateway_access_log_lines_total');
    expect(metrics).to.match(/outcome="written"[^\n]* 0/);
  });
});
