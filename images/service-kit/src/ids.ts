import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/**
 * Random bytes drawn from the system 4 KiB at a time. A draw per id (uuid's own generator asks WebCrypto
 * for 16 bytes per id; a request id was a randomBytes call) was a noticeable share of the HTTP thread's
 * time under small PUTs and GETs.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let at = 0;

/** `n` (at most 4096) fresh random bytes; the pool never hands out the same bytes twice. */
export function pooledRandomBytes(n: number): Buffer {
  if (n > POOL_BYTES) throw new RangeError(`at most ${POOL_BYTES} pooled random bytes at a time`);
  if (at + n > pool.length) {
    // A new pool each time: views handed out before stay the callers' own.
    pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
    at = 0;
  }
  at += n;
  return pool.subarray(at - n, at);
}

/**
 * A UUID v7 (RFC 9562): a millisecond timestamp, then 74 random bits, from the pooled random bytes. Ids
 * sort by their millisecond; within one millisecond their order is random (uuid's counter for ids of the
 * same millisecond applies only to its default generator). For ids where that is enough, e.g. event ids.
 */
export function uuidV7(): string {
  return v7({ random: pooledRandomBytes(16) });
}
