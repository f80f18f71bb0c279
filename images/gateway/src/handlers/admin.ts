import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { parseKeyScope, S3Error } from '../../../object-model/src/index.js';
import { callerOf, state, type Caller } from '../context.js';
import type { GatewayDeps } from '../deps.js';
import { checkSignedJsonBody } from '../s3/request.js';
import { sendData } from '../s3/render.js';

type JsonHandler = (req: Request, res: Response) => Promise<void>;

function wrap(operation: string, handler: JsonHandler) {
  return async (req: Request, res: Response, next: NextFunction) => {
    state(res).operation = operation;
    try {
      checkSignedJsonBody(res, (req as Request & { rawBody?: Buffer }).rawBody);
      // A scoped key only reads its buckets' objects: no admin route is for it.
      if (callerOf(res).scope) throw new S3Error('AccessDenied', 'Access Denied: a scoped access key may not use the admin API.');
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
 * The user a scoped key is made for: the caller, or (root only) the user named in `user`, who must be
 * able to read every bucket the scope names (its owner, or granted READ).
 */
async function scopedKeyParent(res: Response, deps: GatewayDeps, requested: unknown, buckets: string[]): Promise<string> {
  const caller = callerOf(res);
  if (requested !== undefined && requested !== caller.username) {
    requireRoot(res);
    if (typeof requested !== 'string' || !requested) throw new S3Error('InvalidArgument', '"user" names the user the key acts as.');
  }
  const parent = (requested as string | undefined) ?? caller.username;
  const asParent: Caller = { username: parent, accessKey: '', isRoot: false, via: caller.via };
  for (const bucket of new Set(buckets)) await deps.buckets.permitted(bucket, asParent, 'READ');
  return parent;
}

/**
 * Strata's admin API (JSON, Bearer or SigV4): users and their e-mail addresses (root), scoped access keys (read-only keys of the
 * caller limited to named buckets and prefixes), the caller's recycle bin, restore, and purge now
 * (root; a job, read back with GET /admin/jobs/:id). Mounted after authentication.
 */
export function adminRouter(deps: GatewayDeps): Router {
  const router = express.Router();
  router.post(
    '/users',
    wrap('AdminCreateUser', async (req, res) => {
      requireRoot(res);
      const { username, password, email } = (req.body ?? {}) as { username?: unknown; password?: unknown; email?: unknown };
      if (typeof username !== 'string' || typeof password !== 'string' || !username || !password || (email !== undefined && typeof email !== 'string')) {
        throw new S3Error('InvalidArgument', 'POST /admin/users expects {"username": string, "password": string, "email"?: string}.');
      }
      const user = await deps.controlPlane.createUser(username, password, email);
      sendData(res, { username: user.username, accessKey: user.accessKey, secretKey: user.secretKey, ...(user.email ? { email: user.email } : {}) }, 201);
    }),
  );
  router.patch(
    '/users/:username',
    wrap('AdminUpdateUser', async (req, res) => {
      requireRoot(res);
      const { email } = (req.body ?? {}) as { email?: unknown };
      if (email !== null && typeof email !== 'string')
        throw new S3Error('InvalidArgument', 'PATCH /admin/users/:username expects {"email": string} (null: no address).');
      sendData(res, await deps.controlPlane.setUserEmail(String(req.params.username), email));
    }),
  );
  router.post(
    '/access-keys',
    wrap('AdminCreateAccessKey', async (req, res) => {
      const body = (req.body ?? {}) as { user?: unknown };
      const { user, ...rest } = body;
      const scope = parseKeyScope(rest);
      const parent = await scopedKeyParent(
        res,
        deps,
        user,
        scope.resources.map((r) => r.bucket),
      );
      sendData(res, await deps.controlPlane.createScopedKey(parent, scope), 201);
    }),
  );
  router.get(
    '/access-keys',
    wrap('AdminListAccessKeys', async (req, res) => {
      const user = typeof req.query.user === 'string' ? req.query.user : callerOf(res).username;
      if (user !== callerOf(res).username) requireRoot(res);
      sendData(res, { keys: await deps.controlPlane.listScopedKeys(user) });
    }),
  );
  router.delete(
    '/access-keys/:accessKey',
    wrap('AdminDeleteAccessKey', async (req, res) => {
      // The root may delete any; a user its own. (Gateways may honour it until their credential cache forgets it.)
      await deps.controlPlane.deleteScopedKey(String(req.params.accessKey), callerOf(res).isRoot ? undefined : callerOf(res).username);
      res.status(204).end();
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
