import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { CRD_DIRS, generateCrdFiles } from '../../hack/gen-crds.js';
import { bucketSpec, imageIndexSpec, modelServerSpec } from '../../controllers/api/index.js';
import { validateManifest } from './support/validate-manifest.js';

const root = path.resolve(import.meta.dirname, '../..');
const examplesDir = path.join(root, 'crds/examples');

function loadExamples(): Array<{ file: string; obj: Record<string, unknown> }> {
  return readdirSync(examplesDir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(path.join(examplesDir, file), 'utf8')).map((doc) => ({ file, obj: doc.toJS() as Record<string, unknown> })),
    );
}

type Schema = Record<string, unknown>;

/**
 * The API server's structural-schema rules (apiextensions.k8s.io/v1), as far as the generator can
 * break them: a type on every node, properties and additionalProperties never together, anyOf only
 * in the int-or-string form and without types or defaults inside, list-map keys required.
 */
function structuralProblems(node: Schema, at: string): string[] {
  const problems: string[] = [];
  const intOrString = node['x-kubernetes-int-or-string'] === true;
  if (!intOrString && node['x-kubernetes-preserve-unknown-fields'] !== true && typeof node.type !== 'string') problems.push(`${at}: no type`);
  if (node.properties && node.additionalProperties) problems.push(`${at}: properties and additionalProperties together`);
  for (const key of ['oneOf', 'allOf', 'not', '$ref', 'definitions', 'nullable']) if (key in node) problems.push(`${at}: ${key} is not allowed here`);
  if (node.anyOf) {
    if (!intOrString) problems.push(`${at}: anyOf outside int-or-string`);
    for (const branch of node.anyOf as Schema[]) if (Object.keys(branch).some((k) => k !== 'type')) problems.push(`${at}: anyOf branch with more than a type`);
  }
  if ('default' in node) {
    // A default must itself be valid (the API server checks it when the CRD is created).
    const { default: value, ...rest } = node;
    const validate = new Ajv({ strict: false }).compile(rest);
    if (!validate(structuredClone(value))) problems.push(`${at}: default ${JSON.stringify(value)} is invalid`);
  }
  if (node['x-kubernetes-list-type'] === 'map') {
    const items = node.items as Schema;
    for (const key of (node['x-kubernetes-list-map-keys'] as string[]) ?? []) {
      if (!((items.required as string[]) ?? []).includes(key)) problems.push(`${at}: list-map key ${key} is not required`);
    }
  }
  for (const [name, child] of Object.entries((node.properties as Record<string, Schema>) ?? {})) problems.push(...structuralProblems(child, `${at}.${name}`));
  if (node.items) problems.push(...structuralProblems(node.items as Schema, `${at}[]`));
  if (node.additionalProperties && typeof node.additionalProperties === 'object')
    problems.push(...structuralProblems(node.additionalProperties as Schema, `${at}{}`));
  return problems;
}

describe('CRDs', () => {
  const generated = generateCrdFiles();

  for (const dir of CRD_DIRS) {
    it(`${dir}/ matches the generator output (run npm run gen-crds after changing controllers/api)`, () => {
      const committed = readdirSync(path.join(root, dir))
        .filter((f) => f.endsWith('.yaml'))
        .sort();
      expect(committed).to.deep.equal([...generated.keys()].sort());
      for (const [name, text] of generated) expect(readFileSync(path.join(root, dir, name), 'utf8'), name).to.equal(text);
    });
  }

  it('are valid CustomResourceDefinitions with a status subresource and printer columns', async () => {
    for (const [name, text] of generated) {
      const crd = parseAllDocuments(text)[0]!.toJS();
      await validateManifest(crd);
      const version = crd.spec.versions[0];
      expect(version.subresources, name).to.deep.equal({ status: {} });
      expect(
        version.additionalPrinterColumns.map((c: { name: string }) => c.name),
        name,
      ).to.include('Ready');
      expect(crd.spec.scope).to.equal('Namespaced');
      const conditions = version.schema.openAPIV3Schema.properties.status.properties.conditions;
      expect(conditions['x-kubernetes-list-type'], name).to.equal('map');
      expect(conditions['x-kubernetes-list-map-keys'], name).to.deep.equal(['type']);
      expect(conditions.items.required, name).to.include('type');
    }
  });

  it('have structural schemas, as the API server requires', () => {
    for (const [name, text] of generated) {
      const schema = parseAllDocuments(text)[0]!.toJS().spec.versions[0].schema.openAPIV3Schema as Schema;
      expect(structuralProblems(schema, name)).to.deep.equal([]);
    }
    // The check itself finds what it should.
    expect(
      structuralProblems(
        { type: 'object', properties: { a: { anyOf: [{ type: 'string' }, { type: 'integer' }] }, b: {}, c: { type: 'integer', minimum: 1, default: 0 } } },
        'x',
      ),
    ).to.deep.equal(['x.a: no type', 'x.a: anyOf outside int-or-string', 'x.b: no type', 'x.c: default 0 is invalid']);
  });

  it('carry defaults and enums from the TypeScript schemas', () => {
    const imageIndex = parseAllDocuments(generated.get('imageindexes.strata.dev.yaml')!)[0]!.toJS();
    const spec = imageIndex.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties;
    expect(spec.index.default).to.equal('IVF4096,PQ32x8');
    expect(spec.topk.default).to.equal(20);
    expect(spec.bufferThreshold.default).to.equal(1000);
    const bucket = parseAllDocuments(generated.get('buckets.strata.dev.yaml')!)[0]!.toJS();
    const bucketProps = bucket.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties;
    expect(bucketProps.backend.properties.kind.enum).to.deep.equal(['fs', 'minio', 'cloud']);
    expect(bucketProps.deletionPolicy.enum).to.deep.equal(['Retain', 'Delete']);
  });

  it('accept every example and its defaults fill in the rest', async () => {
    const examples = loadExamples();
    expect(examples.length).to.be.greaterThan(4);
    for (const { obj } of examples) await validateManifest(obj);
    const byKind = (kind: string) => examples.filter((e) => e.obj.kind === kind).map((e) => e.obj.spec);
    const specOf = (file: string) => examples.find((e) => e.file === file && e.obj.kind !== 'Secret')!.obj.spec;
    const index = imageIndexSpec.parse(specOf('image-index.yaml'));
    expect(index.topk).to.equal(20);
    const gpuIndex = imageIndexSpec.parse(specOf('image-index-gpu.yaml'));
    expect(gpuIndex.gpu.enabled).to.equal(true);
    expect(bucketSpec.parse(byKind('Bucket')[0]).deletionPolicy).to.equal('Retain');
    expect(modelServerSpec.parse(byKind('ModelServer')[0]).port).to.equal(8000);
  });

  it('reject a resource that breaks the schema', async () => {
    const bad = { apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', metadata: { name: 'b' }, spec: { backend: { kind: 'ftp' }, deletionPolicy: 'Sometimes' } };
    let message = '';
    await validateManifest(bad).catch((err: Error) => (message = err.message));
    expect(message).to.match(/enum|allowed values/);
    expect(() => imageIndexSpec.parse({ source: { bucket: 'b' }, model: { bucket: 'm' }, topk: 0 })).to.throw();
  });
});
