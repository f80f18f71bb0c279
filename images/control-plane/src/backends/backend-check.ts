import { S3Error } from '../../../object-model/src/index.js';
import type { BackendConfig } from '../metadata/store.js';

/** Can a new bucket keep its bytes on this backend? Throws the S3 error that says why not. */
export type BackendCheck = (backend: BackendConfig) => Promise<void>;

/**
 * Asks the data plane (`POST /internal/backends/check`), which owns the backends: 400
 * InvalidArgument for an unknown or unconfigured kind or incomplete settings, 503
 * ServiceUnavailable when the backend cannot be reached. Without a data plane to ask, 503.
 */
export function dataPlaneBackendCheck(dataPlaneUrl: () => string | undefined, internalToken: string): BackendCheck {
  return async (backend) => {
    const base = dataPlaneUrl();
    if (!base) throw new S3Error('ServiceUnavailable', 'No data plane is known to check the storage backend; try again.');
    let res: Response;
    try {
      res = await fetch(`${base}/internal/backends/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-strata-internal-token': internalToken },
        body: JSON.stringify(backend),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new S3Error('ServiceUnavailable', `The data plane could not be asked about the storage backend: ${(err as Error).message}`);
    }
    if (!res.ok) throw S3Error.fromJSON(await res.json().catch(() => undefined));
  };
}
