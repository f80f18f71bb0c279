import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import { assertTextArgument, hasNonUtf8Escapes, requestTarget, S3Error } from '../../../object-model/src/index.js';
import { rawTarget } from '../context.js';

/**
 * The request target checked at the edge, before anything reads it: a path whose escapes are not
 * UTF-8 is InvalidURI; a query parameter (prefix, delimiter, marker, token, response-* override, ...)
 * that is not UTF-8 or holds a control character is InvalidArgument. Nothing such reaches SQL or an
 * answer header. Node refuses raw control bytes in a request line, so only escapes can carry them.
 * (Keys are checked by the kit's assertObjectKey where the S3 endpoint splits the path.)
 */
export function checkRequestTarget(req: http.IncomingMessage, _res: http.ServerResponse, next: Next): void {
  if (!(req.url ?? '').includes('%')) {
    next();
    return;
  }
  // (A target checked lately, a presigned URL fetched again, holds as it did: the check reads the text alone.)
  const target = requestTarget(req);
  if (goodTargets.has(target)) {
    next();
    return;
  }
  const { path, query } = rawTarget(req);
  if (hasNonUtf8Escapes(path)) {
    next(new S3Error('InvalidURI'));
    return;
  }
  try {
    if (query.includes('%')) {
      for (const pair of query.split('&')) {
        if (!hasNonUtf8Escapes(pair)) continue;
        // (The name as sent: ASCII, safe to echo.)
        throw new S3Error('InvalidArgument', 'Query parameters must be percent-encoded UTF-8.', { ArgumentName: pair.split('=')[0] ?? '' });
      }
      // (A NUL can only come from %00: Node refuses raw control bytes.)
      if (query.includes('%00')) for (const [name, value] of new URLSearchParams(query)) assertTextArgument(name, value);
    }
  } catch (err) {
    next(err);
    return;
  }
  if (goodTargets.size >= MAX_GOOD_TARGETS) goodTargets.clear();
  goodTargets.add(target);
  next();
}

/** Targets with escapes found good lately (the check is a function of the text alone). */
const goodTargets = new Set<string>();
const MAX_GOOD_TARGETS = 4096;
