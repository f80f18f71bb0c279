import express, { type Router } from 'express';
import type { BackendRegistry } from './registry.js';

/**
 * `GET /internal/backends/:kind`: can a bucket be created on this backend kind? 200 `{kind, key}`
 * once the backend answers (its bucket made if missing); 400 InvalidArgument for an unknown or
 * unconfigured kind, 503 ServiceUnavailable when it cannot be reached. The gateway asks before it
 * creates a bucket, so a bucket never exists on a backend that was not usable.
 */
export function backendRoutes(backends: BackendRegistry): Router {
  const router = express.Router();
  router.get('/backends/:kind', async (req, res) => {
    const kind = String(req.params.kind);
    const backend = backends.forBucket({ kind });
    await backend.ready?.();
    res.json({ kind, key: backend.key });
  });
  return router;
}
