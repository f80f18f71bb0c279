import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
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

describe('CRDs', () => {
  const generated = generateCrdFiles();

  for (const dir of CRD_DIRS) {
    it(`${dir}/ matches the generator output (run npm run gen-crds after changing controllers/api)`, () => {
      const committed = readdirSync(path.join(root, dir)).filter((f) => f.endsWith('.yaml')).sort();
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
      expect(version.additionalPrinterColumns.map((c: { name: string }) => c.name), name).to.include('Ready');
      expect(crd.spec.scope).to.equal('Namespaced');
      const conditions = version.schema.openAPIV3Schema.properties.status.properties.conditions;
      expect(conditions['x-kubernetes-list-type'], name).to.equal('map');
      expect(conditions['x-kubernetes-list-map-keys'], name).to.deep.equal(['type']);
      expect(conditions.items.required, name).to.include('type');
    }
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
