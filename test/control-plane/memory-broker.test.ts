import { expect } from 'chai';
import { InMemoryBroker } from '../../images/control-plane/src/events/memory-broker.js';
import type { StrataEvent } from '../../images/control-plane/src/events/broker.js';
import { eventually } from '../data-plane/harness.js';

const event = (id: string): StrataEvent => ({ id, type: 'object.created', occurredAt: new Date().toISOString(), payload: {} });

describe('in-memory event broker', () => {
  it('keeps events published before any consumer, delivers in order, and redelivers a rejected one', async () => {
    const broker = new InMemoryBroker(5);
    await broker.publish(event('1'));
    await broker.publish(event('2'));
    const seen: string[] = [];
    let failOnce = true;
    await broker.subscribe('q', async (e) => {
      if (e.id === '2' && failOnce) {
        failOnce = false;
        throw new Error('not now');
      }
      seen.push(e.id);
    });
    await broker.publish(event('3'));
    await eventually(async () => {
      expect([...seen].sort()).to.deep.equal(['1', '2', '3']);
    });
    expect(seen[0]).to.equal('1');
    await broker.close();
  });

  it('sets a message aside after too many rejections instead of looping forever', async () => {
    const broker = new InMemoryBroker(1, 3);
    let attempts = 0;
    await broker.subscribe('q', async () => {
      attempts++;
      throw new Error('poison');
    });
    await broker.publish(event('poison'));
    await eventually(async () => {
      expect(broker.deadLetters.map((d) => [d.queue, d.event.id])).to.deep.equal([['q', 'poison']]);
    });
    expect(attempts).to.equal(3);
    await broker.close();
  });
});
