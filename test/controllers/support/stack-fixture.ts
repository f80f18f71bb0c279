import { secretValue } from '../../../controllers/bucket/stack-secrets.js';
import { eventually, markDeploymentReady, mustGet, startHarness, type Harness } from './harness.js';
import { RecordingControlPlane } from './recording-control-plane.js';

/** A test's fake API server (harness) and the recording control plane standing in for its stack's. */
export interface StackFixture {
  h: Harness;
  cp?: RecordingControlPlane;
}

/** Mocha hooks: a fresh harness for each test, and both it and any control plane stopped after. */
export function useStackFixture(): StackFixture {
  const fixture = {} as StackFixture;
  beforeEach(async () => {
    fixture.h = await startHarness();
    fixture.cp = undefined;
  });
  afterEach(async () => {
    await fixture.h.stop();
    await fixture.cp?.stop();
  });
  return fixture;
}

/**
 * Once the operator has rendered namespace `ns`'s stack: a control plane that takes the stack's
 * internal token, and the control plane and gateway Deployments reported ready.
 */
export async function bringUpStack(fixture: StackFixture, ns: string): Promise<RecordingControlPlane> {
  const internal = await eventually(() => mustGet(fixture.h.fake, 'v1', 'Secret', ns, 'strata-internal'), 'stack secrets');
  fixture.cp = await new RecordingControlPlane(secretValue(internal as never, 'STRATA_INTERNAL_TOKEN')!).start();
  await eventually(() => mustGet(fixture.h.fake, 'apps/v1', 'Deployment', ns, 'strata-gateway'), 'stack applied');
  markDeploymentReady(fixture.h.fake, ns, 'strata-control-plane');
  markDeploymentReady(fixture.h.fake, ns, 'strata-gateway');
  return fixture.cp;
}
