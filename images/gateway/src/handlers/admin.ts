import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { S3Error } from '../../../object-model/src/index.js';
import { callerOf, state } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { checkSignedJsonBody } from '../s3/request.js';
import { sendData } from '../s3/render.js';

type JsonHandler = (req: Request, res: Response) => Promise<void>;

function wrap(operation: string, handler: JsonHandler) {
  return async (req: Request, res: Response, next: NextFunction) => {
    state(res).operation = operation;
    try {
      checkSignedJsonBody(res, (req as Request & { rawBody?: Buffer }).rawBody);
      await handler(req, res);
    } catch (err) {
      next(err);
    }
  };
}

function requireRoot(res: Response): void {
  if (!callerOf(res).isRoot) throw new S3Error('AccessDenied', 'Only the root user may do this.');
}

/**
 * Strata's admin API (JSON, Bearer or SigV4): users (root), the caller's recycle bin, restore,
 * and purge now (root; a job, read back with GET /admin/jobs/:id). Mounted after authentication.
 */
export function adminRouter(deps: GatewayDeps): Router {
  const router = express.Router();
  router.post(
    '/users',
    wrap('AdminCreateUser', async (req, res) => {
      requireRoot(res);
      const { username, password } = (req.body ?? {}) as { username?: unknown; password?: unknown };
      if (typeof username !== 'string' || typeof password !== 'string' || !username || !password) {
        throw new S3Error('InvalidArgument', 'POST /admin/users expects {"username": string, "password": string}.');
      }
      const user = await deps.controlPlane.createUser(username, password);
      sendData(res, { username: user.username, accessKey: user.accessKey, secretKey: user.secretKey }, 201);
    }),
  );
  router.get(
    '/recycle-bin',
    wrap('AdminListRecycleBin', async (req, res) => {
      const text = (name: string) => (typeof req.query[name] === 'string' && req.query[name] ? (req.query[name] as string) : undefined);
      const bucket = text('bucket');
      if (bucket) await deps.buckets.owned(bucket, callerOf(res));
      const maxItems = text('max-items');
      if (maxItems !== undefined && !/^\d{1,4}$/.test(maxItems)) throw new S3Error('InvalidArgument', 'max-items must be a whole number from 1 to 1000.');
      const page = await deps.controlPlane.recycleBin(callerOf(res).username, {
        bucket,
        prefix: text('prefix'),
        limit: maxItems === undefined ? undefined : Number(maxItems),
        after: text('continuation-token'),
      });
      sendData(res, { objects: page.objects, isTruncated: page.nextToken !== undefined, ...(page.nextToken ? { nextToken: page.nextToken } : {}) });
    }),
  );
  router.post(
    '/recycle-bin/:id/restore',
    wrap('AdminRestore', async (req, res) => {
      const object = await deps.controlPlane.restore(String(req.params.id), callerOf(res).username);
      sendData(res, { object });
    }),
  );
  router.post(
    '/purge',
    wrap('AdminPurge', async (req, res) => {
      requireRoot(res);
      const now = (req.body as { now?: unknown } | undefined)?.now;
      if (now !== undefined && (typeof now !== 'string' || Number.isNaN(Date.parse(now))))
        throw new S3Error('InvalidArgument', '"now" must be an ISO 8601 time.');
      // Long work: 202 with the job at once; GET /admin/jobs/:id tells how it went.
      const job = await deps.controlPlane.purge(now);
      res.setHeader('Location', `/admin/jobs/${job.id}`);
      sendData(res, job, 202);
    }),
  );
  router.get(
    '/jobs/:id',
    wrap('AdminGetJob', async (req, res) => {
      requireRoot(res);
      sendData(res, await deps.controlPlane.job(String(req.params.id)));
    }),
  );
  router.use((_req: Request, res: Response, next: NextFunction) => {
    state(res).operation = 'AdminUnknown';
    next(new S3Error('InvalidRequest', 'Unknown admin route.'));
  });
  return router;
}
