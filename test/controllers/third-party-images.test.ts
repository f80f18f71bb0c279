import { expect } from 'chai';
import { renderStorageStack } from '../../controllers/bucket/render-storage-stack.js';
import { THIRD_PARTY_IMAGES } from '../../controllers/support/third-party-images.js';
import { loadOperatorEnv, settingsFrom } from '../../operator/config.js';
import { template } from '../charts/support/helm.js';
import { TEST_CREDENTIALS, TEST_SETTINGS, type Doc } from './support/harness.js';

const owners = [{ apiVersion: 'strata.dev/v1alpha1', kind: 'Bucket', name: 'photos', uid: 'u1' }];

/** Images of the bundled PostgreSQL, RabbitMQ and Redis StatefulSets (and the Redis create Job), by name. */
function backingImages(settings = TEST_SETTINGS): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const o of renderStorageStack('ns', owners, settings, TEST_CREDENTIALS) as Doc[]) {
    if ((o.kind !== 'StatefulSet' && o.kind !== 'Job') || !/postgresql|rabbitmq|redis/.test(o.metadata.name)) continue;
    if (o.kind === 'Job') o.metadata.name = 'strata-redis-create';
    const spec = o.spec.template.spec;
    out[o.metadata.name] = [...(spec.initContainers ?? []), ...spec.containers].map((c: Doc) => c.image as string);
  }
  return out;
}

describe('third-party images: pinned, RabbitMQ supported, registry override', () => {
  it('pulls PostgreSQL and RabbitMQ from Docker Hub by exact version, RabbitMQ past 3.13', () => {
    const images = backingImages();
    expect(Object.keys(images)).to.include.members(['strata-postgresql', 'strata-postgresql-replica', 'strata-rabbitmq', 'strata-redis-create']);
    for (const image of Object.values(images).flat()) expect(image).to.match(/^docker\.io\/library\/(postgres|rabbitmq|redis):\d+\.\d+(\.\d+)?(-alpine)?$/);
    expect(images['strata-redis-create']![0]).to.equal('docker.io/library/redis:7.2.5-alpine');
    expect(images['strata-rabbitmq']![0]).to.equal('docker.io/library/rabbitmq:4.1.4');
    for (const pinned of Object.values(THIRD_PARTY_IMAGES)) expect(pinned).to.match(/:\d+\.\d+(\.\d+)?(-[a-z]+)?$/); // a release, never `16` or `latest`
  });

  it('pulls them from the configured registry (operator env STRATA_THIRD_PARTY_REGISTRY)', () => {
    const settings = settingsFrom(loadOperatorEnv({ STRATA_THIRD_PARTY_REGISTRY: 'registry.example.com/mirror' }));
    for (const image of Object.values(backingImages({ ...TEST_SETTINGS, thirdPartyRegistry: settings.thirdPartyRegistry })).flat()) {
      expect(image).to.match(/^registry\.example\.com\/mirror\/(postgres|rabbitmq|redis):/);
    }
  });

  it('passes the chart value platform.thirdPartyRegistry to the operator', async function () {
    this.timeout(60_000);
    const objs = await template(['platform.thirdPartyRegistry=registry.example.com/mirror/']);
    const operator = objs.find((o) => o.kind === 'Deployment') as Doc;
    const env = operator.spec.template.spec.containers[0].env as Array<{ name: string; value: string }>;
    expect(env.find((e) => e.name === 'STRATA_THIRD_PARTY_REGISTRY')?.value).to.equal('registry.example.com/mirror/');
  });
});
