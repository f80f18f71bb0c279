import { spawn } from 'node:child_process';
import { expect } from 'chai';
import type { RunningService } from '../../images/service-kit/src/index.js';
import { imageIndexSpec, type ImageIndex } from '../../controllers/api/index.js';
import { HttpIndexWorkerClient } from '../../controllers/image-index/index-worker-client.js';
import { renderIndexJob, type IndexOperation } from '../../controllers/image-index/render-image-index.js';
import { AUTH_HEADER, startTestImageSearch, type TestImageSearch } from '../image-search/support/fixtures.js';
import { TEST_SETTINGS, type Doc } from './support/harness.js';

const JWT_SECRET = 'operator-contract-jwt-secret-0123456789';
const ix = {
  apiVersion: 'strata.dev/v1alpha1',
  kind: 'ImageIndex',
  metadata: { name: 'photos', namespace: 'ns', uid: 'u' },
  spec: imageIndexSpec.parse({ source: { directory: '/x' }, model: { directory: '/m' } }),
} as ImageIndex;

/** Run a merge or rebuild Job's container command as the Job would, against a worker URL. */
function runJob(op: IndexOperation, workerUrl: string): Promise<{ code: number | null; output: string }> {
  const container = (renderIndexJob(ix, op, `photos-${op}-1`, TEST_SETTINGS) as Doc).spec.template.spec.containers[0];
  // Secret references resolved as the kubelet would.
  const env = Object.fromEntries(
    container.env.map((e: { name: string; value?: string }) => [e.name, e.value ?? (e.name === 'STRATA_JWT_SECRET' ? JWT_SECRET : '')]),
  );
  const [command, ...args] = container.command as string[];
  expect(command).to.equal('node');
  const child = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH, ...env, WORKER_URL: workerUrl, POLL_MS: '50' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
}

/**
 * The ImageIndex controller's view of a real image-search worker: the status fields it reads, and the
 * merge and rebuild Jobs' script run against the worker's API.
 */
describe('ImageIndex controller against a real image-search worker', function () {
  this.timeout(120_000);
  let fixture: TestImageSearch;
  let service: RunningService;

  before(async () => {
    fixture = await startTestImageSearch('operator-index', { IMAGE_SEARCH_BUFFER_THRESHOLD: 5, STRATA_JWT_SECRET: JWT_SECRET });
    service = fixture.service;
    const paths = Object.values(fixture.images.colourFiles).flat();
    const added = await fetch(`${service.url}/api/index/add`, {
      method: 'POST',
      headers: { ...AUTH_HEADER, 'content-type': 'application/json' },
      body: JSON.stringify({ image_paths: paths }),
    });
    expect(added.status).to.equal(200);
  });
  after(async () => {
    await fixture?.close();
  });

  it('reads vectors and buffer, runs a merge Job that empties the buffer, then a rebuild Job', async () => {
    const client = new HttpIndexWorkerClient();
    const before = await client.status(service.url);
    expect(before.vectors).to.be.greaterThan(5);
    expect(before.bufferSize).to.equal(before.vectors);

    const merge = await runJob('merge', service.url);
    expect(merge.code, merge.output).to.equal(0);
    expect(merge.output).to.match(/merge done/);
    const merged = await client.status(service.url);
    expect(merged).to.deep.equal({ vectors: before.vectors, bufferSize: 0, busy: false });

    const rebuild = await runJob('rebuild', service.url);
    expect(rebuild.code, rebuild.output).to.equal(0);
    expect(rebuild.output).to.match(/rebuild done/);
    expect(await client.status(service.url)).to.deep.equal({ vectors: before.vectors, bufferSize: 0, busy: false });
  });

  it('fails the Job when the worker refuses the operation', async () => {
    const refused = await runJob('merge', `${service.url}/no-such-prefix`);
    expect(refused.code).to.equal(1);
    expect(refused.output).to.match(/refused: 404/);
  });
});
