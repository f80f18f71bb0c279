import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { renderFlowRulesConfigMap, renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets } from '../../controllers/bucket/stack-secrets.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { TEST_SETTINGS, type Doc } from './support/harness.js';

const root = path.resolve(import.meta.dirname, '../..');
const COMPONENTS = ['gateway', 'data-plane', 'control-plane'] as const;

/** Every TypeScript source a service image runs: its own src/ and the service kit. */
function sourcesOf(component: string): string {
  const dirs = [path.join(root, 'images', component, 'src'), path.join(root, 'images/service-kit/src')];
  return dirs
    .flatMap((dir) => readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')).map((f) => readFileSync(path.join(dir, f), 'utf8')))
    .join('\n');
}

/** Variables a service's entrypoint requires (a zod string with neither default nor optional). */
function requiredVars(component: string): string[] {
  const files = ['main.ts', 'config.ts'].map((f) => path.join(root, 'images', component, 'src', f));
  const text = files.map((f) => (readdirSync(path.dirname(f)).includes(path.basename(f)) ? readFileSync(f, 'utf8') : '')).join('\n');
  return [...text.matchAll(/^\s*(STRATA_[A-Z0-9_]+): z\.string\(\)(.*)$/gm)].filter((m) => !/\.(default|optional)\(/.test(m[2]!)).map((m) => m[1]!);
}

/** The variable names a container of the stack receives: envFrom ConfigMaps and Secrets, and env. */
function varsOf(container: Doc, objects: Manifest[]): string[] {
  const keysOf = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name) as Doc | undefined;
    if (!o) throw new Error(`${kind} ${name} is referenced but not rendered`);
    return Object.keys({ ...(o.data ?? {}), ...(o.stringData ?? {}) });
  };
  const fromEnvFrom = (container.envFrom ?? []).flatMap((s: Doc) => (s.configMapRef ? keysOf('ConfigMap', s.configMapRef.name) : keysOf('Secret', s.secretRef.name)));
  return [...fromEnvFrom, ...(container.env ?? []).map((e: { name: string }) => e.name)];
}

describe('storage stack environment vs. the services that read it', () => {
  const settings = { ...TEST_SETTINGS, postgresReplicaUrls: ['postgres://r1/strata', 'postgres://r2/strata'] };
  const objects = [...renderStorageStack('ns', [], settings), ...renderStackSecrets('ns'), renderFlowRulesConfigMap('ns')];
  const containerOf = (component: string) => (objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `strata-${component}`) as Doc).spec.template.spec.containers[0];

  for (const component of COMPONENTS) {
    it(`gives ${component} every variable its entrypoint requires`, () => {
      const given = varsOf(containerOf(component), objects);
      const required = requiredVars(component);
      expect(required.length, `${component}: found no required variables; has its entrypoint moved?`).to.be.greaterThan(0);
      for (const name of required) expect(given, `${component} needs ${name}`).to.include(name);
    });

    it(`sets no variable on ${component} itself that it does not read`, () => {
      const sources = sourcesOf(component);
      for (const { name } of containerOf(component).env as Array<{ name: string }>) expect(sources, `${component} reads ${name}`).to.match(new RegExp(`\\b${name}\\b`));
    });
  }

  it('sets no shared variable that none of the services receiving it reads', () => {
    const readers = Object.fromEntries(COMPONENTS.map((c) => [c, sourcesOf(c)]));
    const shared = new Map<string, string[]>();
    for (const component of COMPONENTS) for (const name of varsOf(containerOf(component), objects)) shared.set(name, [...(shared.get(name) ?? []), component]);
    for (const [name, receivers] of shared) {
      expect(
        receivers.some((c) => new RegExp(`\\b${name}\\b`).test(readers[c]!)),
        `${name} (given to ${receivers.join(', ')}) is read by none of them`,
      ).to.equal(true);
    }
    // The names the production adapters read (PostgreSQL primary and replicas, Redis Cluster, RabbitMQ).
    expect([...shared.keys()]).to.include.members(['STRATA_PG_URL', 'STRATA_PG_REPLICA_URLS', 'STRATA_REDIS_NODES', 'STRATA_AMQP_URL']);
  });

  it('keeps connection URLs (passwords) in a Secret the gateway does not get', () => {
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config') as Doc;
    expect(JSON.stringify(config.data)).to.not.match(/postgres:|amqp:/);
    const platform = objects.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-platform') as Doc;
    const decoded = Object.fromEntries(Object.entries(platform.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    expect(decoded).to.deep.equal({ STRATA_PG_URL: settings.postgresUrl, STRATA_PG_REPLICA_URLS: 'postgres://r1/strata,postgres://r2/strata', STRATA_AMQP_URL: settings.amqpUrl });
    expect(varsOf(containerOf('gateway'), objects)).to.not.include('STRATA_PG_URL');
    // Without replicas the key is absent (server-side apply then removes it from a live Secret).
    const plain = renderStorageStack('ns', [], TEST_SETTINGS).find((o) => o.kind === 'Secret') as Doc;
    expect(Object.keys(plain.data)).to.deep.equal(['STRATA_PG_URL', 'STRATA_AMQP_URL']);
  });
});
