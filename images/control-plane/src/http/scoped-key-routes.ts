import express, { type Request, type Router } from 'express';
import { parseKeyScope, S3Error } from '../../../object-model/src/index.js';
import type { UserService } from '../users/user-service.js';

/** Names the operator gives its keys (`imageindex.<namespace>.<name>`). */
const KEY_NAME = /^[a-z0-9][a-z0-9.-]{0,252}$/;

function parentOf(value: unknown): string {
  if (typeof value !== 'string' || !value) throw new S3Error('InvalidArgument', 'parent: the user the key acts as');
  return value;
}

/** A key pair the operator chose (it keeps it in a Secret): an id as users' are, a long secret. */
function keyPairOf(body: { accessKey?: unknown; secretKey?: unknown }): { accessKey: string; secretKey: string } {
  const { accessKey, secretKey } = body;
  if (typeof accessKey !== 'string' || !/^[A-Z2-7]{20}$/.test(accessKey)) throw new S3Error('InvalidArgument', 'accessKey: 20 characters of A-Z and 2-7');
  if (typeof secretKey !== 'string' || !/^[\x21-\x7e]{32,128}$/.test(secretKey))
    throw new S3Error('InvalidArgument', 'secretKey: 32 to 128 printable characters');
  return { accessKey, secretKey };
}

function nameOf(req: Request): string {
  const name = String(req.params.name);
  if (!KEY_NAME.test(name)) throw new S3Error('InvalidArgument', 'a key name is lower-case letters, digits, "." and "-"');
  return name;
}

/**
 * Scoped access keys on the internal API: the gateway's admin API makes, lists and deletes them for
 * users (it checks who may); the operator keeps one per ImageIndex by name, with the key pair it keeps
 * in a Secret of its own (PUT is idempotent: the store is brought to the Secret, never the other way).
 */
export function scopedKeyRoutes(users: UserService): Router {
  const router = express.Router();
  router.post('/scoped-keys', async (req, res) => {
    const body = (req.body ?? {}) as { parent?: unknown };
    res.status(201).json(await users.createScopedKey(parentOf(body.parent), parseKeyScope(req.body)));
  });
  router.get('/users/:username/scoped-keys', async (req, res) => {
    res.json({ keys: await users.listScopedKeys(String(req.params.username)) });
  });
  router.delete('/scoped-keys/:accessKey', async (req, res) => {
    const parent = typeof req.query.parent === 'string' ? req.query.parent : undefined;
    const deleted = await users.deleteScopedKey(String(req.params.accessKey), { parent });
    if (!deleted) throw new S3Error('InvalidAccessKeyId', 'no such scoped key');
    res.status(204).end();
  });
  router.put('/scoped-keys/by-name/:name', async (req, res) => {
    const { parent, accessKey, secretKey, ...scope } = (req.body ?? {}) as { parent?: unknown; accessKey?: unknown; secretKey?: unknown };
    const key = keyPairOf({ accessKey, secretKey });
    const parsed = parseKeyScope(scope);
    const { created } = await users.ensureScopedKey(nameOf(req), parentOf(parent), parsed, key);
    res.status(created ? 201 : 200).json({ accessKey: key.accessKey, parent, scope: parsed });
  });
  router.delete('/scoped-keys/by-name/:name', async (req, res) => {
    // Gone already is fine: the operator's cleanup may run again.
    await users.deleteScopedKey(nameOf(req), { byName: true });
    res.status(204).end();
  });
  return router;
}
