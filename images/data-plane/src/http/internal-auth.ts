import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { S3Error } from '../../../service-kit/src/index.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Every internal call carries `x-strata-internal-token`; anything else is 401 (compared in constant time). */
export function requireInternalToken(token: string) {
  const expected = digest(token);
  return (req: Request, _res: Response, next: NextFunction) => {
    const given = req.header('x-strata-internal-token');
    if (!given || !timingSafeEqual(digest(given), expected)) {
      next(new S3Error('Unauthorized', 'missing or wrong x-strata-internal-token'));
      return;
    }
    next();
  };
}
