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

  it('hands out up to `prefetch` deliveries at once, in order, and the next ones as those settle', async () => {
    const broker = new InMemoryBroker(5, 20, 3);
    const started: string[] = [];
    let inFlight = 0;
    let most = 0;
    const gates: Array<() => void> = [];
    await broker.subscribe('q', async (e) => {
      started.push(e.id);
      most = Math.max(most, ++inFlight);
      await new Promise<void>((resolve) => gates.push(resolve));
      inFlight--;
    });
    for (let i = 0; i < 10; i++) await broker.publish(event(String(i)));
    await eventually(async () => {
      expect(started).to.have.length(3);
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(started, 'no more than the prefetch before one settles').to.have.length(3);
    while (started.length < 10 || gates.length > 0) {
      gates.shift()?.();
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(started).to.deep.equal(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
    expect(most).to.equal(3);
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
