import { expect } from 'chai';
import { LoginGuard, Slots } from '../../images/gateway/src/auth/login-guard.js';
import { parseFlowRules, type FlowRules } from '../../images/gateway/src/flow-control/rules.js';
import { S3Error } from '../../images/object-model/src/index.js';

describe('gateway login guard', () => {
  it('the rules file turns login limits on by default and lets them be changed', () => {
    expect(parseFlowRules('{}').login).to.deep.equal({
      failuresPerIp: { points: 100, duration: 900 },
      failuresPerUser: { points: 10, duration: 900 },
      concurrentHashes: 2,
      queuedHashes: 64,
    });
    expect(parseFlowRules('login: { concurrentHashes: 1 }').login.failuresPerUser.points).to.equal(10);
    expect(() => parseFlowRules('login: { failuresPerIp: { points: 0, duration: 1 } }')).to.throw(/login.failuresPerIp.points/);
  });

  it('counts failures per username+IP and per IP; a success clears the username+IP count; a reload applies at once', async () => {
    let rules: FlowRules = parseFlowRules('login: { failuresPerIp: { points: 4, duration: 60 }, failuresPerUser: { points: 2, duration: 60 } }');
    const guard = new LoginGuard({ kind: 'memory' }, () => rules);
    await guard.failed('10.0.0.1', 'ann');
    await guard.succeeded('10.0.0.1', 'ann');
    await guard.failed('10.0.0.1', 'ann');
    expect((await guard.check('10.0.0.1', 'ann')).allowed).to.equal(true);
    await guard.failed('10.0.0.1', 'ann');
    const user = await guard.check('10.0.0.1', 'ann');
    expect(user).to.include({ allowed: false, scope: 'user' });
    expect(user.allowed === false && user.retryAfterSeconds).to.be.within(1, 60);
    expect((await guard.check('10.0.0.2', 'ann')).allowed).to.equal(true);
    expect((await guard.check('10.0.0.1', 'bob')).allowed).to.equal(true);
    await guard.failed('10.0.0.1', 'bob');
    expect(await guard.check('10.0.0.1', 'carl')).to.include({ allowed: false, scope: 'ip' });
    rules = parseFlowRules('login: { failuresPerIp: { points: 50, duration: 60 }, failuresPerUser: { points: 2, duration: 60 } }');
    expect((await guard.check('10.0.0.1', 'carl')).allowed).to.equal(true);
  });

  it('password checks run a few at a time; a full queue is refused with SlowDown', async () => {
    const slots = new Slots();
    let running = 0;
    let most = 0;
    const gates: Array<() => void> = [];
    const task = () =>
      slots.run(2, 3, async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => gates.push(resolve));
        running -= 1;
      });
    const admitted = [task(), task(), task(), task(), task()];
    const refused = await task().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(S3Error);
    expect((refused as S3Error).code).to.equal('SlowDown');
    while (gates.length > 0 || running > 0) {
      await new Promise((r) => setImmediate(r));
      gates.shift()?.();
    }
    await Promise.all(admitted);
    expect(most).to.equal(2);
    expect(slots.inUse).to.equal(0);
  });

  it('one address flooding logins holds at most its share of the password checks: another address still gets one', async () => {
    const rules = parseFlowRules('login: { concurrentHashes: 1, queuedHashes: 5 }');
    const guard = new LoginGuard({ kind: 'memory' }, () => rules);
    const gates: Array<() => void> = [];
    const blocked = () => new Promise<void>((resolve) => gates.push(resolve));
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'done',
        (err: unknown) => (err instanceof S3Error ? err.code : err),
      );
    const flood = Array.from({ length: 10 }, () => outcome(guard.hashing('10.0.0.66', blocked)));
    // The other address is admitted (it waits its turn in the queue), not refused SlowDown.
    const other = outcome(guard.hashing('10.0.0.2', async () => undefined));
    while (gates.length > 0) {
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(await other).to.equal('done');
    const floodOutcomes = await Promise.all(flood);
    expect(floodOutcomes.filter((o) => o === 'done').length).to.be.within(1, 3);
    expect(floodOutcomes.filter((o) => o === 'SlowDown').length).to.be.at.least(7);
    expect(guard.hashesInFlight).to.equal(0);
  });
});
