import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect } from 'chai';
import { readdirSync, writeFileSync } from 'node:fs';
import { parseAllDocuments, visit } from 'yaml';
import type { KubeObject } from '../../controllers/support/kube-client.js';
import { ClientNodeKubeClient } from '../../operator/kube-client.js';
import { runRenderCommand } from '../../operator/render-command.js';
import { loadCrds } from '../controllers/support/harness.js';
import { validateManifest } from '../controllers/support/validate-manifest.js';
import { FakeKubeServer } from '../support/fake-kube/index.js';
import { freshDirPerTest } from '../support/temp-dir.js';

const root = path.resolve(import.meta.dirname, '../..');

const RESOURCES = `apiVersion: strata.dev/v1alpha1
kind: Bucket
metadata: { name: photos }
spec: { backend: { kind: fs } }
---
apiVersion: strata.dev/v1alpha1
kind: ImageIndex
metadata: { name: photos }
spec: { source: { bucket: photos }, model: { bucket: models } }
---
apiVersion: strata.dev/v1alpha1
kind: ModelServer
metadata: { name: poems }
spec: { truncatePrompt: true }
`;

type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
};

function render(file: string, namespace: string, env: NodeJS.ProcessEnv = {}, extra: string[] = []): { status: number; stdout: string; stderr: string } {
  let stdout = '';
  let stderr = '';
  const status = runRenderCommand(
    ['-f', file, '--namespace', namespace, ...extra],
    env,
    (s) => (stdout += s),
    (s) => (stderr += s),
  );
  return { status, stdout, stderr };
}

function parse(text: string): Doc[] {
  return parseAllDocuments(text).map((d) => {
    expect(d.errors).to.deep.equal([]);
    return d.toJS() as Doc;
  });
}

/** Every value a stack's services connect or authenticate with, decoded. */
function connectionValues(docs: Doc[]): string[] {
  const values: string[] = [];
  for (const d of docs) {
    if (d.kind === 'Secret') {
      values.push(...Object.values(d.stringData ?? {}).filter((v) => v !== 'strata-root'));
      values.push(...Object.values(d.data ?? {}).map((v) => Buffer.from(v, 'base64').toString()));
    }
    if (d.kind === 'ConfigMap' && d.metadata.name === 'strata-config') {
      for (const key of ['STRATA_AMQP_EXCHANGE', 'STRATA_AMQP_QUEUE_PREFIX']) values.push(d.data![key]!);
    }
  }
  return values;
}

describe('operator render (what the operator would apply, without a cluster)', function () {
  this.timeout(60_000);
  const dir = freshDirPerTest('strata-render-');
  const file = () => path.join(dir.path, 'resources.yaml');

  it('prints valid Kubernetes objects, and a Bucket photos in two namespaces shares no database, queue or secret', async () => {
    writeFileSync(file(), RESOURCES);
    const [a, b] = ['team-a', 'team-b'].map((ns) => {
      const r = render(file(), ns, {}, ['--secrets=generate']);
      expect(r.stderr).to.equal('');
      expect(r.status).to.equal(0);
      return parse(r.stdout);
    });
    for (const [docs, ns] of [
      [a!, 'team-a'],
      [b!, 'team-b'],
    ] as const) {
      for (const d of docs) {
        await validateManifest(d);
        expect(d.metadata.namespace, `${d.kind} ${d.metadata.name}`).to.equal(ns);
      }
      const names = docs.map((d) => `${d.kind}/${d.metadata.name}`);
      expect(names).to.include.members([
        'Deployment/strata-gateway',
        'Secret/strata-backing-credentials',
        'Deployment/photos-index-worker',
        'Deployment/poems-model-server',
      ]);
      const modelServer = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'poems-model-server');
      expect(JSON.stringify(modelServer)).to.contain('{"name":"MODEL_SERVER_TRUNCATE_PROMPT","value":"true"}');
    }
    const valuesA = connectionValues(a!);
    const valuesB = connectionValues(b!);
    expect(
      valuesA.some((v) => v.includes('/strata_team_a')),
      'database URL of team-a',
    ).to.equal(true);
    expect(valuesA.some((v) => v.includes('strata.team-a.events'))).to.equal(true);
    expect(
      valuesA.filter((v) => valuesB.includes(v)),
      'values both namespaces have',
    ).to.deep.equal([]);
  });

  it('renders with the settings of the operator environment (external servers)', () => {
    writeFileSync(file(), RESOURCES);
    const r = render(file(), 'team-a', { STRATA_PG_URL: 'postgres://admin:secret@db:5432/postgres', STRATA_AMQP_URL: 'amqp://mq:5672' }, [
      '--secrets=generate',
    ]);
    expect(r.status, r.stderr).to.equal(0);
    const docs = parse(r.stdout);
    expect(docs.map((d) => d.metadata.name)).to.not.include('strata-postgresql');
    expect(connectionValues(docs).some((v) => v.startsWith('postgres://strata_team_a:') && v.includes('@db:5432/strata_team_a'))).to.equal(true);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['not YAML', 'kind: [', /document 1: not YAML/],
    ['an unknown Strata kind', 'apiVersion: strata.dev/v1alpha1\nkind: Pod\nmetadata: { name: x }\n', /strata.dev\/v1alpha1 Pod is not a Strata resource/],
    [
      'a Bucket without spec (the CRD requires it)',
      'apiVersion: strata.dev/v1alpha1\nkind: Bucket\nmetadata: { name: photos }\n',
      /document 1 \(Bucket photos\): spec: Required value/,
    ],
    ['a foreign object of another namespace', 'apiVersion: v1\nkind: Secret\nmetadata: { name: s, namespace: other }\n', /metadata.namespace other differs/],
    [
      'an invalid spec',
      `${RESOURCES}---\napiVersion: strata.dev/v1alpha1\nkind: ModelServer\nmetadata: { name: bad }\nspec: { replicas: -1 }\n`,
      /document 4 \(ModelServer bad\): invalid spec/,
    ],
    [
      'another namespace',
      'apiVersion: strata.dev/v1alpha1\nkind: ModelServer\nmetadata: { name: m, namespace: other }\n',
      /metadata.namespace other differs from --namespace team-a/,
    ],
  ];
  for (const [what, text, message] of bad) {
    it(`refuses ${what} with a clear error, non-zero status and no output`, () => {
      writeFileSync(file(), text);
      const r = render(file(), 'team-a');
      expect(r.status).to.equal(1);
      expect(r.stdout).to.equal('');
      expect(r.stderr).to.match(message);
    });
  }

  it('renders every example as plain YAML that an API server accepts, and applying a second render changes nothing', async () => {
    const examples = path.join(root, 'crds/examples');
    const fake = await new FakeKubeServer(loadCrds()).start();
    try {
      const kube = new ClientNodeKubeClient(fake.kubeConfig());
      const applyAll = async (text: string) => {
        for (const d of parse(text)) await kube.apply(d as unknown as KubeObject);
      };
      for (const example of readdirSync(examples).filter((f) => f.endsWith('.yaml'))) {
        const namespace = example.replace(/\.yaml$/, '');
        const [first, second] = [1, 2].map(() => render(path.join(examples, example), namespace));
        for (const r of [first!, second!]) expect(r.status, `${example}: ${r.stderr}`).to.equal(0);
        for (const doc of parseAllDocuments(first!.stdout)) {
          visit(doc, { Alias: () => expect.fail(`${example}: the output uses YAML anchors and aliases`) });
        }
        const docs = parse(first!.stdout);
        expect(
          docs.filter((d) => d.kind === 'Secret').map((d) => d.metadata.name),
          `${example}: only the file's own Secrets`,
        ).to.deep.equal(example === 'bucket-minio.yaml' ? ['minio-credentials'] : []);
        if (example.startsWith('bucket-')) expect(first!.stdout, example).to.match(/^# Secrets left out \(--secrets=omit\): strata-root-credentials, /);

        await applyAll(first!.stdout);
        const versions = () =>
          docs.map(
            (d) =>
              `${d.kind}/${d.metadata.name}@${fake.state.tryGet(fake.state.typeForKind(d.apiVersion, d.kind), namespace, d.metadata.name)?.metadata.resourceVersion}`,
          );
        const before = versions();
        await applyAll(second!.stdout);
        expect(versions(), `${example}: applied twice`).to.deep.equal(before);
      }
    } finally {
      await fake.stop();
    }
  });

  it('passes objects of other kinds through, in the namespace', () => {
    const r = render(path.join(root, 'crds/examples/bucket-minio.yaml'), 'team-a');
    expect(r.status, r.stderr).to.equal(0);
    const secret = parse(r.stdout).find((d) => d.kind === 'Secret');
    expect(secret).to.deep.equal({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'minio-credentials', namespace: 'team-a', labels: { 'strata.dev/backend-credentials': 'true' } },
      type: 'Opaque',
      stringData: { accessKey: 'minioadmin', secretKey: 'minioadmin' },
    });
    expect(r.stdout).to.contain('# Passed through from the resource file as given');
  });

  it('refuses an unknown --secrets mode with usage', () => {
    writeFileSync(file(), RESOURCES);
    const r = render(file(), 'team-a', {}, ['--secrets=rotate']);
    expect(r.status).to.equal(2);
    expect(r.stdout).to.equal('');
    expect(r.stderr).to.match(/--secrets must be one of omit, generate/);
  });

  it('runs as `npm run operator -- render`, exiting non-zero on a missing file', () => {
    const r = spawnSync('npm', ['run', '-s', 'operator', '--', 'render', '-f', path.join(dir.path, 'missing.yaml'), '--namespace', 'team-a'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(r.status).to.equal(1);
    expect(r.stderr).to.match(/no such file: .*missing\.yaml/);
  });
});
