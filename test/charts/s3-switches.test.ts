import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { loadGatewayEnv } from '../../images/gateway/src/config.js';
import { loadOperatorEnv, settingsFrom } from '../../operator/config.js';
import { runRenderCommand } from '../../operator/render-command.js';
import { freshDirPerTest } from '../support/temp-dir.js';
import { CHART_DIR, helm, template, type RenderedObject } from './support/helm.js';

type Container = { name: string; env?: Array<{ name: string; value?: string }>; envFrom?: Array<{ configMapRef?: { name: string } }> };
type Workload = RenderedObject & { data?: Record<string, string>; spec: { template: { spec: { containers: Container[] } } } };

/** The STRATA_STACK_SETTINGS the chart gives the operator, as JSON text. */
async function stackSettingsJson(sets: string[]): Promise<string> {
  const operator = (await template(sets)).find((o) => o.kind === 'Deployment' && o.metadata.name === 'strata-operator') as Workload;
  return operator.spec.template.spec.containers[0]!.env!.find((e) => e.name === 'STRATA_STACK_SETTINGS')!.value!;
}

/** The three switches as the operator reads the chart's value. */
const switches = (json: string) => {
  const settings = settingsFrom(loadOperatorEnv({ STRATA_STACK_SETTINGS: json })).stackSettings;
  return {
    STRATA_SIGV2: settings.STRATA_SIGV2,
    STRATA_BLOCK_PUBLIC_ACLS: settings.STRATA_BLOCK_PUBLIC_ACLS,
    STRATA_DEFAULT_OBJECT_OWNERSHIP: settings.STRATA_DEFAULT_OBJECT_OWNERSHIP,
  };
};

/**
 * The gateway's S3 access switches in the chart (platform.s3 → STRATA_SIGV2, STRATA_BLOCK_PUBLIC_ACLS,
 * STRATA_DEFAULT_OBJECT_OWNERSHIP): in
 * values and their schema, given to the operator, and by `operator render` to each stack's gateway.
 */
describe('chart: the S3 access switches (Signature V2, platform public access block, default object ownership)', function () {
  this.timeout(120_000);
  const dir = freshDirPerTest('strata-s3-switches-');

  it('gives the stacks the defaults (SigV2 on, public ACLs allowed, S3 ownership), the values set, and lets platform.settings win', async () => {
    expect(switches(await stackSettingsJson([]))).to.deep.equal({
      STRATA_SIGV2: 'true',
      STRATA_BLOCK_PUBLIC_ACLS: 'false',
      STRATA_DEFAULT_OBJECT_OWNERSHIP: 'BucketOwnerEnforced',
    });
    const set = ['platform.s3.signatureV2=false', 'platform.s3.blockPublicAcls=true', 'platform.s3.defaultObjectOwnership=ObjectWriter'];
    expect(switches(await stackSettingsJson(set))).to.deep.equal({
      STRATA_SIGV2: 'false',
      STRATA_BLOCK_PUBLIC_ACLS: 'true',
      STRATA_DEFAULT_OBJECT_OWNERSHIP: 'ObjectWriter',
    });
    const overridden = [
      'platform.s3.blockPublicAcls=true',
      'platform.settings.STRATA_BLOCK_PUBLIC_ACLS=false',
      'platform.s3.defaultObjectOwnership=ObjectWriter',
      'platform.settings.STRATA_DEFAULT_OBJECT_OWNERSHIP=BucketOwnerPreferred',
    ];
    expect(switches(await stackSettingsJson(overridden))).to.deep.equal({
      STRATA_SIGV2: 'true',
      STRATA_BLOCK_PUBLIC_ACLS: 'false',
      STRATA_DEFAULT_OBJECT_OWNERSHIP: 'BucketOwnerPreferred',
    });
  });

  it('refuses what values.schema.json does not allow under platform.s3', async () => {
    for (const bad of [
      'platform.s3.signatureV2=maybe',
      'platform.s3.blockPublicAcls=1',
      'platform.s3.sigv4=true',
      'platform.s3.defaultObjectOwnership=objectwriter',
      'platform.s3.defaultObjectOwnership=Public',
    ]) {
      const result = await helm(['template', 'strata', CHART_DIR, '--set', bad]);
      expect(result.code, bad).to.not.equal(0);
      expect(result.stderr, bad).to.match(/schema|values don't meet/i);
    }
  });

  it("reaches the gateway through `operator render`: the stack's ConfigMap, which the gateway reads, holds them and the gateway parses them", async () => {
    const json = await stackSettingsJson(['platform.s3.signatureV2=false', 'platform.s3.blockPublicAcls=true', 'platform.s3.defaultObjectOwnership=ObjectWriter']);
    const file = path.join(dir.path, 'bucket.yaml');
    writeFileSync(file, 'apiVersion: strata.dev/v1alpha1\nkind: Bucket\nmetadata: { name: photos }\nspec: { backend: { kind: fs } }\n');
    let stdout = '';
    let stderr = '';
    const status = runRenderCommand(
      ['-f', file, '--namespace', 'team-a'],
      { STRATA_STACK_SETTINGS: json },
      (s) => (stdout += s),
      (s) => (stderr += s),
    );
    expect(status, stderr).to.equal(0);
    const docs = parseAllDocuments(stdout).map((d) => d.toJS() as Workload);
    const gateway = docs.find((d) => d.kind === 'Deployment' && d.metadata.name.includes('gateway'))!;
    const configMaps = gateway.spec.template.spec.containers.flatMap((c) => c.envFrom ?? []).flatMap((e) => (e.configMapRef ? [e.configMapRef.name] : []));
    expect(configMaps).to.have.length(1);
    const config = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === configMaps[0])!;
    expect(config.data).to.include({ STRATA_SIGV2: 'false', STRATA_BLOCK_PUBLIC_ACLS: 'true', STRATA_DEFAULT_OBJECT_OWNERSHIP: 'ObjectWriter' });
    // The rest of the gateway's environment comes from the stack's Secret (omitted by render): stand-ins.
    const env = loadGatewayEnv({ ...config.data, STRATA_INTERNAL_TOKEN: 't'.repeat(64), STRATA_JWT_SECRET: 's'.repeat(64) });
    expect([env.STRATA_SIGV2, env.STRATA_BLOCK_PUBLIC_ACLS, env.STRATA_DEFAULT_OBJECT_OWNERSHIP]).to.deep.equal([false, true, 'ObjectWriter']);
  });
});
