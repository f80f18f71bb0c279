import { expect } from 'chai';
import {
  IMAGE_INDEX_KIND,
  MODEL_SERVER_KIND,
  imageIndexSpec,
  modelServerSpec,
  nameProblem,
  renderCrd,
  type ImageIndex,
  type ModelServer,
} from '../../controllers/api/index.js';
import { renderFlowRulesConfigMap, renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { renderStackSecrets } from '../../controllers/bucket/stack-secrets.js';
import { jobName, renderImageIndex, renderIndexJob } from '../../controllers/image-index/render-image-index.js';
import { renderModelServer } from '../../controllers/model-server/render-model-server.js';
import type { Manifest } from '../../controllers/support/kube-client.js';
import { harnessHooks, TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';

const longest = (max: number) => `n${'x'.repeat(max - 1)}`;
const indexOf = (name: string) => {
  const spec = { source: { bucket: 'photos' }, model: { directory: '/m' } };
  const ix = { apiVersion: 'strata.dev/v1alpha1', kind: 'ImageIndex', metadata: { name, namespace: 'ns', uid: 'u' }, spec } as unknown as ImageIndex;
  return [
    ...renderImageIndex(ix, imageIndexSpec.parse(spec), TEST_SETTINGS),
    ...(['merge', 'rebuild'] as const).map((op) => renderIndexJob(ix, op, jobName(ix, op, 'request:1'), TEST_SETTINGS)),
  ];
};
const modelServerOf = (name: string) => {
  const spec = { model: { name: 'tiny', path: '/m' } };
  const ms = { apiVersion: 'strata.dev/v1alpha1', kind: 'ModelServer', metadata: { name, namespace: 'ns', uid: 'u' }, spec } as unknown as ModelServer;
  return renderModelServer(ms, modelServerSpec.parse(spec), TEST_SETTINGS);
};

/** Every pod spec inside a rendered object (Deployment, StatefulSet, Job, CronJob). */
function podSpecs(obj: Manifest): Doc[] {
  const spec = obj.spec as Doc | undefined;
  if (obj.kind === 'CronJob') return [spec!.jobTemplate.spec.template.spec];
  return spec?.template?.spec ? [spec.template.spec] : [];
}

describe('names and pod security', () => {
  describe('names derived from the longest allowed resource name', () => {
    const h = harnessHooks('suite');

    it('all fit what the API server accepts (63 characters, DNS-1035 Services)', async () => {
      for (const obj of [...indexOf(longest(IMAGE_INDEX_KIND.name.maxLength)), ...modelServerOf(longest(MODEL_SERVER_KIND.name.maxLength))])
        await h.kube.apply(obj);
    });

    it('one character more is refused by the CRD and by the reconciler', async () => {
      for (const def of [IMAGE_INDEX_KIND, MODEL_SERVER_KIND]) {
        expect(nameProblem(def, longest(def.name.maxLength))).to.equal(undefined);
        expect(nameProblem(def, longest(def.name.maxLength + 1))).to.match(/longer than/);
        expect(nameProblem(def, '1abc')).to.match(/start with a letter/);
        const rules = (renderCrd(def) as Doc).spec.versions[0].schema.openAPIV3Schema['x-kubernetes-validations'] as Array<{ rule: string }>;
        expect(rules.map((r) => r.rule)).to.include(`self.metadata.name.size() <= ${def.name.maxLength}`);
      }
    });
  });

  it('runs every pod and container restricted: non-root, RuntimeDefault seccomp, no escalation, no capabilities', () => {
    const all = [
      ...renderStorageStack('ns', [], TEST_SETTINGS, TEST_CREDENTIALS),
      ...renderStackSecrets('ns'),
      renderFlowRulesConfigMap('ns'),
      ...indexOf('ix'),
      ...modelServerOf('ms'),
    ];
    let pods = 0;
    for (const obj of all) {
      for (const pod of podSpecs(obj)) {
        pods++;
        const where = `${obj.kind}/${obj.metadata.name}`;
        expect(pod.securityContext, where).to.deep.include({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
        for (const c of [...(pod.initContainers ?? []), ...pod.containers] as Doc[]) {
          expect(c.securityContext, `${where} ${c.name}`).to.deep.include({
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          });
        }
      }
    }
    // Deployments, StatefulSets (6 Redis, 3 backing), the Redis Job, the CronJob, the worker, 2 index Jobs, the model server.
    expect(pods).to.be.greaterThan(15);
  });

  it('schedules the purge in the configured time zone, UTC by default', () => {
    const cron = (settings = TEST_SETTINGS) => renderStorageStack('ns', [], settings, TEST_CREDENTIALS).find((o) => o.kind === 'CronJob') as Doc;
    expect(cron().spec.timeZone).to.equal('UTC');
    expect(cron({ ...TEST_SETTINGS, purgeTimeZone: 'Europe/Berlin' }).spec.timeZone).to.equal('Europe/Berlin');
  });
});
