import { ControlPlaneClient } from '../../images/gateway/src/clients/control-plane.js';
import { DataPlaneClient } from '../../images/gateway/src/clients/data-plane.js';
import { httpObjectLayer } from '../../images/gateway/src/clients/object-layer.js';
import { startObjectLayer, TOKEN } from '../data-plane/harness.js';
import { FakeObjectLayer } from '../gateway/fake-object-layer.js';
import { objectLayerContract } from './object-layer-contract.js';

/** The tests' fake, in memory: the handler tests stand on it, so it must keep the contract the real layer keeps. */
objectLayerContract('the tests’ FakeObjectLayer', async () => ({ layer: new FakeObjectLayer(), close: async () => undefined }));

/**
 * The real layer as the gateway uses it: its HTTP clients over a data plane and a control plane on
 * embedded PostgreSQL (PGlite), files on disk. A first PGlite start in a loaded process is slow: the
 * hooks allow for it (test/support/pglite-warmup.ts pays it once per run).
 */
objectLayerContract(
  'the real layer (gateway clients → data and control planes on PGlite)',
  async () => {
    const planes = await startObjectLayer('pglite');
    const cp = new ControlPlaneClient(planes.cp.url, TOKEN);
    const dp = new DataPlaneClient(planes.dp.url, TOKEN);
    await cp.createUser('alice', 'alice-password');
    await cp.createUser('bob', 'bob-password-1');
    return {
      layer: httpObjectLayer(cp, dp),
      close: async () => {
        cp.http.close();
        dp.http.close();
        await planes.stop();
      },
    };
  },
  { hookTimeoutMs: 180_000 },
);
