import { expect } from 'chai';
import { Counter, createRegistry, deferredCounts } from '../../images/service-kit/src/index.js';

/** Counts added up in memory and handed to the counter when it is read (metrics.ts, deferredCounts): a reader sees every one. */
describe('service-kit: deferred counts', () => {
  it('shows every count at each read, by label, as direct increments would', async () => {
    const registry = createRegistry('test', false);
    const counter = new Counter({ name: 'test_bytes_total', help: 'bytes', labelNames: ['operation'] as const, registers: [registry] });
    const count = deferredCounts(counter, 'operation');
    const other = deferredCounts(counter, 'operation');
    count('GetObject', 100);
    count('GetObject', 20);
    count('PutObject');
    other('GetObject', 3);
    expect(await registry.metrics())
      .to.include('test_bytes_total{operation="GetObject",service="test"} 123')
      .and.include('test_bytes_total{operation="PutObject",service="test"} 1');
    count('GetObject', 7);
    counter.inc({ operation: 'PutObject' }, 2);
    const values = (await counter.get()).values.map((v) => [v.labels.operation, v.value]);
    expect(values).to.deep.include.members([
      ['GetObject', 130],
      ['PutObject', 3],
    ]);
  });
});
