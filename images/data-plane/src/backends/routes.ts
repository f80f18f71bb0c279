import express, { type Router } from 'express';
import { S3Error } from '../../../object-model/src/index.js';
import type { BackendRegistry } from './registry.js';

/**
 * `POST /internal/backends/check {kind, ...settings}`: can a bucket keep its bytes there? 200
 * `{kind, key}` once the backend answers (its bucket made if missing); 400 InvalidArgument for an
 * unknown or unconfigured kind or incomplete settings; 503 ServiceUnavailable when it cannot be
 * reached. The control plane asks before it creates a bucket, so none exists on an unusable backend.
 */
export function backendRoutes(backends: BackendRegistry): Router {
  const router = express.Router();
  router.post('/backends/check', express.json({ limit: '64kb' }), async (req, res) => {
    const config: unknown = req.body;
    if (!config || typeof config !== 'object' || typeof (config as { kind?: unknown }).kind !== 'string') {
      throw new S3Error('InvalidArgument', 'the body must be a backend config {kind, ...settings}');
    }
    const backend = await backends.check(config as { kind: string });
    res.json({ kind: (config as { kind: string }).kind, key: backend.key });
  });
  return router;
}
