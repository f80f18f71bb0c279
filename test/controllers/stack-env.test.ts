import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import {
  CONFIG_HASH_ANNOTATION,
  OPERATOR_STACK_VARIABLES,
  renderFlowRulesConfigMap,
  renderStorageStack,
} from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets } from '../../controllers/bucket/stack-secrets.js';
import { renderImageIndex } from '../../controllers/image-index/render-image-index.js';
import { renderModelServer } from '../../controllers/model-server/render-model-server.js';
import { imageIndexSpec, modelServerSpec, type ImageIndex, type ModelServer } from '../../controllers/api/index.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';
import { validateManifest } from './support/validate-manifest.js';

const root = path.resolve(import.meta.dirname, '../..');
const COMPONENTS = ['gateway', 'data-plane', 'control-plane'] as const;

/** Every TypeScript source a service image runs: its own src/ and the service kit. */
function sourcesOf(component: string): string {
  const dirs = [path.join(root, 'images', component, 'src'), path.join(root, 'images/service-kit/src')];
  return dirs
    .flatMap((dir) =>
      readdirSync(dir, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => readFileSync(path.join(dir, f), 'utf8')),
    )
    .join('\n');
}

/** Variables a service's entrypoint requires (a zod string, or one of the kit's shared secrets, with neither default nor optional). */
function requiredVars(component: string): string[] {
  const files = ['main.ts', 'config.ts'].map((f) => path.join(root, 'images', component, 'src', f));
  const text = files.map((f) => (readdirSync(path.dirname(f)).includes(path.basename(f)) ? readFileSync(f, 'utf8') : '')).join('\n');
  return [...text.matchAll(/^\s*(STRATA_[A-Z0-9_]+): (?:z\.string\(\)|secretsEnv\.STRATA_[A-Z0-9_]+)(.*)$/gm)]
    .filter((m) => !/\.(default|optional)\(/.test(m[2]!))
    .map((m) => m[1]!);
}

/** The variable names a container of the stack receives: envFrom ConfigMaps and Secrets, and env. */
function varsOf(container: Doc, objects: Manifest[]): string[] {
  const keysOf = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name) as Doc | undefined;
    if (!o) throw new Error(`${kind} ${name} is referenced but not rendered`);
    return Object.keys({ ...(o.data ?? {}), ...(o.stringData ?? {}) });
  };
  // An optional Secret the operator does not render (the administrator's backends) adds nothing here.
  const fromEnvFrom = (container.envFrom ?? [])
    .filter((s: Doc) => !s.secretRef?.optional)
    .flatMap((s: Doc) => (s.configMapRef ? keysOf('ConfigMap', s.configMapRef.name) : keysOf('Secret', s.secretRef.name)));
  return [...fromEnvFrom, ...(container.env ?? []).map((e: { name: string }) => e.name)];
}

describe('storage stack environment vs. the services that read it', () => {
  const settings = {
    ...TEST_SETTINGS,
    postgresUrl: 'postgres://admin:pw@db/postgres',
    postgresReplicaUrls: ['postgres://r1/strata', 'postgres://r2/strata'],
    amqpUrl: 'amqp://mq',
  };
  const objects = [...renderStorageStack('ns', [], settings, TEST_CREDENTIALS), ...renderStackSecrets('ns'), renderFlowRulesConfigMap('ns')];
  const containerOf = (component: string) =>
    (objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `strata-${component}`) as Doc).spec.template.spec.containers[0];

  for (const component of COMPONENTS) {
    it(`gives ${component} every variable its entrypoint requires`, () => {
      const given = varsOf(containerOf(component), objects);
      const required = requiredVars(component);
      expect(required.length, `${component}: found no required variables; has its entrypoint moved?`).to.be.greaterThan(0);
      for (const name of required) expect(given, `${component} needs ${name}`).to.include(name);
    });

    it(`sets no variable on ${component} itself that it does not read`, () => {
      const sources = sourcesOf(component);
      for (const { name } of containerOf(component).env as Array<{ name: string }>)
        expect(sources, `${component} reads ${name}`).to.match(new RegExp(`\\b${name}\\b`));
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
    expect([...shared.keys()]).to.include.members([
      'STRATA_PG_URL',
      'STRATA_PG_REPLICA_URLS',
      'STRATA_REDIS_NODES',
      'STRATA_REDIS_REPLICA_ACKS',
      'STRATA_AMQP_URL',
    ]);
  });

  it('keeps connection URLs (passwords) in a Secret the gateway does not get', () => {
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config') as Doc;
    expect(JSON.stringify(config.data)).to.not.match(/postgres:|amqp:/);
    const platform = objects.find((o) => o.kind === 'Secret' && o.metadata.name === 'strata-platform') as Doc;
    const decoded = Object.fromEntries(Object.entries(platform.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    // The namespace's own role and database, and its own broker user and vhost, on the administrator's servers.
    expect(decoded).to.deep.equal({
      STRATA_PG_URL: 'postgres://strata_ns:pg-password@db/strata_ns',
      STRATA_PG_REPLICA_URLS: 'postgres://strata_ns:pg-password@r1/strata_ns,postgres://strata_ns:pg-password@r2/strata_ns',
      STRATA_AMQP_URL: 'amqp://strata-ns:mq-password@mq/strata-ns',
    });
    expect(varsOf(containerOf('gateway'), objects)).to.not.include('STRATA_PG_URL');
    // Without replicas the key is absent (server-side apply then removes it from a live Secret).
    const plain = renderStorageStack('ns', [], { ...settings, postgresReplicaUrls: [] }, TEST_CREDENTIALS).find((o) => o.kind === 'Secret') as Doc;
    expect(Object.keys(plain.data)).to.deep.equal(['STRATA_PG_URL', 'STRATA_AMQP_URL']);
  });
});

describe("the administrator's stack settings", () => {
  const deployments = (objects: Manifest[]) => objects.filter((o) => o.kind === 'Deployment') as Doc[];
  const hashes = (objects: Manifest[]) => deployments(objects).map((d) => d.spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION] as string);

  it('reach every service of the stack through its ConfigMap, beside what the operator sets', async () => {
    const stackSettings = { STRATA_S3_DOMAINS: 's3.example.com', STRATA_BUCKET_NAME_HOLD_MS: '120000', LOG_LEVEL: 'debug' };
    const objects = [
      ...renderStorageStack('ns', [], { ...TEST_SETTINGS, stackSettings }, TEST_CREDENTIALS),
      ...renderStackSecrets('ns'),
      renderFlowRulesConfigMap('ns'),
    ];
    for (const o of objects) await validateManifest(o);
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'strata-config') as Doc;
    expect(config.data).to.include(stackSettings).and.include({ STRATA_DATA_DIR: '/data', STRATA_PURGE_CRON_ENABLED: 'false' });
    for (const component of COMPONENTS) {
      const container = (objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `strata-${component}`) as Doc).spec.template.spec.containers[0];
      expect(varsOf(container, objects), component).to.include.members(Object.keys(stackSettings));
    }
    // The services named read them (the gateway its domains, the control plane the name hold).
    expect(sourcesOf('gateway')).to.match(/\bSTRATA_S3_DOMAINS\b/);
    expect(sourcesOf('control-plane')).to.match(/\bSTRATA_BUCKET_NAME_HOLD_MS\b/);
  });

  it('never name a variable the operator sets: its list covers every variable its containers get', () => {
    const objects = [
      ...renderStorageStack('ns', [], { ...TEST_SETTINGS, postgresReplicaUrls: ['postgres://r/strata'] }, TEST_CREDENTIALS),
      ...renderStackSecrets('ns'),
      renderFlowRulesConfigMap('ns'),
    ];
    for (const component of COMPONENTS) {
      const container = (objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `strata-${component}`) as Doc).spec.template.spec.containers[0];
      for (const name of varsOf(container, objects)) expect(OPERATOR_STACK_VARIABLES.has(name), `${component}: ${name}`).to.equal(true);
    }
  });

  it('roll the pods when they or the connection URLs change (a digest in the pod template), and only then', () => {
    const base = hashes(renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS));
    expect(base).to.have.length(3);
    expect(new Set(base).size).to.equal(1);
    expect(base[0]).to.match(/^[0-9a-f]{16}$/);
    expect(hashes(renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS))).to.deep.equal(base);
    const changed = [
      { ...TEST_SETTINGS, stackSettings: { STRATA_BUCKET_CACHE_MS: '500' } },
      { ...TEST_SETTINGS, postgresUrl: 'postgres://elsewhere/strata' },
      { ...TEST_SETTINGS, postgresUrl: 'postgres://db/strata', postgresReplicaUrls: ['postgres://r/strata'] },
    ];
    expect(hashes(renderStorageStack('ns', [], changed[2]!, TEST_CREDENTIALS))).to.not.deep.equal(
      hashes(renderStorageStack('ns', [], { ...changed[2]!, postgresReplicaUrls: [] }, TEST_CREDENTIALS)),
    );
    for (const settings of changed)
      expect(hashes(renderStorageStack('ns', [], settings, TEST_CREDENTIALS))[0], JSON.stringify(settings.stackSettings)).to.not.equal(base[0]);
  });
});

describe('server-wide storage backends under the operator', () => {
  const objects = renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS);
  const refsOf = (component: string) =>
    ((objects.find((o) => o.kind === 'Deployment' && o.metadata.name === `strata-${component}`) as Doc).spec.template.spec.containers[0].envFrom as Doc[])
      .filter((s) => s.secretRef?.name === 'strata-backends')
      .map((s) => s.secretRef);

  it('gives only the data plane the optional strata-backends Secret, which the operator never renders', () => {
    expect(refsOf('data-plane')).to.deep.equal([{ name: 'strata-backends', optional: true }]);
    expect(refsOf('gateway')).to.deep.equal([]);
    expect(refsOf('control-plane')).to.deep.equal([]);
    expect(objects.some((o) => o.metadata.name === 'strata-backends')).to.equal(false);
    // The data plane is what reads those variables.
    expect(sourcesOf('data-plane')).to.match(/STRATA_BACKEND_/);
  });
});

describe('index worker and model server environment vs. the services that read it', () => {
  const envNames = (objs: Manifest[]) =>
    ((objs.find((o) => o.kind === 'Deployment') as Doc).spec.template.spec.containers[0].env as Array<{ name: string }>).map((e) => e.name);
  const workerEnv = (spec: object) => {
    const ix = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name: 'ix', namespace: 'ns', uid: 'u' }, spec } as unknown as ImageIndex;
    return envNames(renderImageIndex(ix, imageIndexSpec.parse(spec), TEST_SETTINGS));
  };

  it('sets only variables image-search reads, for directory and bucket sources, on CPU and GPU', () => {
    const sources = sourcesOf('image-search');
    const names = new Set([
      ...workerEnv({ source: { directory: '/images' }, model: { directory: '/models' } }),
      ...workerEnv({ source: { bucket: 'photos', prefix: 'p/' }, model: { bucket: 'models' }, gpu: { enabled: true } }),
    ]);
    // OMP_WAIT_POLICY is read by OpenMP inside FAISS, not by the service's code.
    for (const name of [...names].filter((n) => n !== 'OMP_WAIT_POLICY')) expect(sources, `image-search reads ${name}`).to.match(new RegExp(`\\b${name}\\b`));
    expect([...names]).to.include.members(['IMAGE_SEARCH_SOURCE_S3_URL', 'IMAGE_SEARCH_MODEL_S3_URL', 'IMAGE_SEARCH_EXECUTION_PROVIDER', 'IMAGE_FILE_DIR']);
  });

  it('mirrors a bucket source onto the state volume and scans a directory source at start', () => {
    const ix = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name: 'ix', namespace: 'ns', uid: 'u' } } as unknown as ImageIndex;
    const envOf = (spec: object) => {
      const d = renderImageIndex({ ...ix, spec } as never, imageIndexSpec.parse(spec), TEST_SETTINGS).find((o) => o.kind === 'Deployment') as Doc;
      const c = d.spec.template.spec.containers[0];
      return {
        env: Object.fromEntries(c.env.map((e: { name: string; value?: string }) => [e.name, e.value])),
        mounts: c.volumeMounts as Array<{ mountPath: string }>,
      };
    };
    const bucket = envOf({ source: { bucket: 'photos' }, model: { directory: '/models' } });
    const state = bucket.mounts[0]!.mountPath;
    for (const dir of ['IMAGE_FILE_DIR', 'IMAGE_SEARCH_INDEX_DIR', 'IMAGE_SEARCH_MODEL_CACHE_DIR'])
      expect(bucket.env[dir], dir).to.match(new RegExp(`^${state}/`));
    const directory = envOf({ source: { directory: '/images' }, model: { directory: '/models' } });
    expect(directory.env).to.include({ IMAGE_FILE_DIR: '/images', IMAGE_SEARCH_SCAN_ON_START: 'true' });
  });

  it('sets only variables the model server reads', () => {
    const sources = sourcesOf('model-server');
    const ms = { apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name: 'm', namespace: 'ns', uid: 'u' } } as unknown as ModelServer;
    const spec = { model: { name: 'my-model', path: '/models/mine' }, gpu: { enabled: true } };
    const names = envNames(renderModelServer({ ...ms, spec } as never, modelServerSpec.parse(spec), TEST_SETTINGS));
    for (const name of names) expect(sources, `model-server reads ${name}`).to.match(new RegExp(`\\b${name}\\b`));
    expect(names).to.include.members(['MODEL_NAMES', 'MODEL_DIR', 'STRATA_EXECUTION_PROVIDER']);
  });
});
