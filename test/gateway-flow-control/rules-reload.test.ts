import { mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseFlowRules, InvalidRulesError } from '../../images/gateway/src/flow-control/index.js';
import { eventually, hit, metricValue, startTestGateway, tempDir, type TestGateway } from './support.js';

const limitOf = (g: TestGateway) => g.fc.rules().rateLimits.users.default?.points;
const userRule = (points: number) => `rateLimits:\n  users:\n    default: { points: ${points}, duration: 60 }\n`;

/**
 * Lay out a directory the way the kubelet mounts a ConfigMap: the file is a symlink to
 * `..data/<file>`, `..data` a symlink to a timestamped directory holding the real file.
 */
class ConfigMapDir {
  private generation = 0;
  private current?: string;
  constructor(
    readonly dir: string,
    readonly fileName: string,
  ) {}

  get file(): string {
    return path.join(this.dir, this.fileName);
  }

  /** Publish new content: new timestamped dir, `..data_tmp` symlink renamed over `..data`, old dir removed. */
  publish(content: string): void {
    const stamp = `..2026_11_22_22_00_${String(this.generation++).padStart(2, '0')}.${process.pid}`;
    mkdirSync(path.join(this.dir, stamp));
    writeFileSync(path.join(this.dir, stamp, this.fileName), content);
    symlinkSync(stamp, path.join(this.dir, '..data_tmp'));
    renameSync(path.join(this.dir, '..data_tmp'), path.join(this.dir, '..data'));
    if (!this.current) symlinkSync(path.join('..data', this.fileName), this.file);
    else rmSync(path.join(this.dir, this.current), { recursive: true, force: true });
    this.current = stamp;
  }
}

describe('gateway flow control: rules file reload', function () {
  this.timeout(60_000);
  let tmp: ReturnType<typeof tempDir>;
  let g: TestGateway | undefined;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(async () => {
    await g?.stop();
    g = undefined;
    tmp.remove();
  });

  it('validates the rules: unknown fields, bad numbers, a user in two classes', () => {
    expect(() => parseFlowRules('rateLimits: { users: { default: { points: 0, duration: 1 } } }')).to.throw(InvalidRulesError, /points/);
    expect(() => parseFlowRules('ratelimits: {}')).to.throw(InvalidRulesError, /ratelimits/);
    expect(() => parseFlowRules('concurrency: { routes: { GetObject: "many" } }')).to.throw(InvalidRulesError);
    expect(() => parseFlowRules('{ not yaml')).to.throw(InvalidRulesError, /YAML/);
    expect(() =>
      parseFlowRules('rateLimits: { users: { classes: { a: { points: 1, duration: 1, users: [x] }, b: { points: 2, duration: 1, users: [x] } } } }'),
    ).to.throw(InvalidRulesError, /two classes/);
    const empty = parseFlowRules('');
    expect(empty.breakers.default.timeout).to.be.greaterThan(0);
    expect(empty.rateLimits.routes).to.deep.equal({});
  });

  it('accepts the example rules file shipped with the gateway', () => {
    const example = new URL('../../images/gateway/src/flow-control/rules.example.yaml', import.meta.url);
    const rules = parseFlowRules(readFileSync(example, 'utf8'));
    expect(rules.rateLimits.users.classes.batch!.users).to.deep.equal(['etl-bot']);
    expect(rules.breakers.upstreams['data-plane']!.timeout).to.equal(60000);
  });

  it('applies a rewritten file without restart (directory watch only, no polling)', async () => {
    const file = path.join(tmp.dir, 'rules.yaml');
    writeFileSync(file, userRule(1));
    g = await startTestGateway({ rulesFile: file, debounceMs: 50, pollMs: 0 });
    expect((await hit(`${g.url}/GetObject/k`, 'alice')).status).to.equal(200);
    expect((await hit(`${g.url}/GetObject/k`, 'alice')).status).to.equal(503);
    writeFileSync(file, userRule(100));
    await eventually(() => limitOf(g!) === 100, 'the rewritten rules');
    expect((await hit(`${g.url}/GetObject/k`, 'alice')).status).to.equal(200);
    expect(await metricValue(g.registry, 'strata_gateway_flow_rules_reloads_total', { outcome: 'applied' })).to.equal(1);
  });

  it('applies a ConfigMap-style symlink swap (..data -> timestamped dir)', async () => {
    const cm = new ConfigMapDir(tmp.dir, 'flow-rules.yaml');
    cm.publish(userRule(1));
    g = await startTestGateway({ rulesFile: cm.file, debounceMs: 50, pollMs: 0 });
    expect((await hit(`${g.url}/PutObject/k`, 'bob')).status).to.equal(200);
    expect((await hit(`${g.url}/PutObject/k`, 'bob')).status).to.equal(503);
    cm.publish(userRule(50));
    await eventually(() => limitOf(g!) === 50, 'the swapped rules');
    expect((await hit(`${g.url}/PutObject/k`, 'bob')).status).to.equal(200);
    // And a second swap (the watch survives the first).
    cm.publish(`${userRule(50)}concurrency: { routes: { hold: 1 } }\n`);
    await eventually(() => g!.fc.rules().concurrency.routes.hold === 1, 'the second swap');
    expect(g.lines.filter((l) => l.msg === 'flow-control rules reloaded')).to.have.length(2);
  });

  it('keeps the previous rules when the new file is malformed, and logs why', async () => {
    const cm = new ConfigMapDir(tmp.dir, 'flow-rules.yaml');
    cm.publish(userRule(2));
    g = await startTestGateway({ rulesFile: cm.file, debounceMs: 50, pollMs: 0 });
    cm.publish('rateLimits: { users: { default: { points: -5, duration: 60 } } }');
    await eventually(async () => (await metricValue(g!.registry, 'strata_gateway_flow_rules_reloads_total', { outcome: 'rejected' })) === 1, 'the rejection');
    cm.publish(': : not yaml [');
    await eventually(
      async () => (await metricValue(g!.registry, 'strata_gateway_flow_rules_reloads_total', { outcome: 'rejected' })) === 2,
      'the second rejection',
    );
    expect(limitOf(g)).to.equal(2);
    const rejections = g.lines.filter((l) => l.msg === 'flow-control rules rejected; keeping the previous rules');
    expect(rejections).to.have.length(2);
    expect(rejections[0]!.level).to.equal(50); // pino "error"
    expect(String(rejections[0]!.err)).to.match(/points/);
    // The old limit still holds.
    expect((await hit(`${g.url}/GetObject/k`, 'carol')).status).to.equal(200);
    expect((await hit(`${g.url}/GetObject/k`, 'carol')).status).to.equal(200);
    expect((await hit(`${g.url}/GetObject/k`, 'carol')).status).to.equal(503);
    // A good file afterwards is applied.
    cm.publish(userRule(10));
    await eventually(() => limitOf(g!) === 10, 'the good rules');
  });

  it('refuses to start on a malformed rules file', async () => {
    const file = path.join(tmp.dir, 'rules.yaml');
    writeFileSync(file, 'breakers: { default: { timeout: "soon" } }');
    let error: unknown;
    try {
      g = await startTestGateway({ rulesFile: file });
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(InvalidRulesError);
  });

  it('also re-reads on a timer (for file systems that report no events) and ignores unchanged content', async () => {
    const file = path.join(tmp.dir, 'rules.yaml');
    writeFileSync(file, userRule(3));
    g = await startTestGateway({ rulesFile: file, pollMs: 50 });
    writeFileSync(file, userRule(4));
    await eventually(() => limitOf(g!) === 4, 'the polled rules');
    expect(await g.fc.reload()).to.equal('unchanged');
  });
});
