import { Readable } from 'node:stream';
import { notModified, type Cancellation, type GetObjectInput, type ObjectLayer, type ObjectRead } from '../../../object-model/src/index.js';
import { forwardingLayer } from '../../../object-model/src/forwarding-layer.js';
import { ByteBoundedLru } from '../../../service-kit/src/byte-bounded-lru.js';
import { currentObjectVersion, knownObjectVersion, OBJECT_READ_CACHE_TTL_S, type ReadCacheStore } from '../../../object-model/src/object-read-cache.js';
import { readWhole } from '../s3/whole-body.js';

/** The object layer's answer to a whole-object GET: the read (its metadata), and the body. */
export interface ObjectAnswer {
  read: Omit<ObjectRead, 'body'>;
  body: Buffer;
}

/** A kept answer, and the read a GET of it is answered with (made once, when it is kept). */
export interface KeptAnswer extends ObjectAnswer {
  get: ObjectRead & { bytes: Buffer };
}

interface Entry extends KeptAnswer {
  version: string;
  storedAt: number;
}

/**
 * The data plane's answers to GETs of small objects, kept in the gateway, so that a hot small object
 * is answered without the hop to the data plane (its HTTP client, server and handler work, about half
 * of a small GET's CPU).
 *
 * An answer is served only while the object's version token in the shared cache (the one the data
 * plane's own read cache uses: object-read-cache.ts) is the token read BEFORE the data plane was
 * asked. Every write path replaces that token after its commit and before it answers, so a write
 * acknowledged before a GET began is never hidden from it: read-after-write stays strong, across
 * gateway replicas too (the token lives in the shared cache, in Redis Cluster in production). Entries
 * also expire as the data plane's do (OBJECT_READ_CACHE_TTL_S), which bounds the one residual risk:
 * a writer killed between its commit and its token change. Bounded in bytes, least recently used out
 * first. The caller has checked the caller's access to the bucket before it asks. Served in front of
 * the object layer by answeringObjectLayer.
 */
export class ObjectAnswerCache {
  private readonly entries: ByteBoundedLru<Entry>;

  constructor(
    private readonly shared: ReadCacheStore,
    /** Most body bytes held in all. */
    readonly maxBytes: number,
    /** Largest body kept. */
    readonly maxObjectBytes: number,
    private readonly onLookup?: (hit: boolean) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new ByteBoundedLru(maxBytes, (entry) => entry.body.length);
  }

  /** The object's current version (set when there is none), or undefined when the shared cache fails. */
  async version(bucket: string, key: string): Promise<string | undefined> {
    return currentObjectVersion(this.shared, bucket, key).catch(() => undefined);
  }

  /** The object's current version when the shared cache tells it at once (in this process's memory), else undefined. */
  versionNow(bucket: string, key: string): string | undefined {
    return knownObjectVersion(this.shared, bucket, key);
  }

  /** The answer stored under `version`, if it is still that version's and fresh. */
  get(bucket: string, key: string, version: string): KeptAnswer | undefined {
    const id = entryId(bucket, key);
    const entry = this.entries.peek(id);
    const hit = entry !== undefined && entry.version === version && this.now() - entry.storedAt < OBJECT_READ_CACHE_TTL_S * 1000;
    this.onLookup?.(hit);
    return hit ? this.entries.use(id) : undefined;
  }

  /** Keep the answer read after `version` was taken (a copy of the body: it may be a view of a larger buffer). */
  set(bucket: string, key: string, version: string, answer: ObjectAnswer): void {
    const id = entryId(bucket, key);
    if (answer.body.length > this.maxObjectBytes || answer.body.length > this.maxBytes) {
      this.entries.delete(id);
      return;
    }
    // Outside Node's shared allocation pool, so that an entry holds exactly its own bytes.
    const body = Buffer.allocUnsafeSlow(answer.body.length);
    answer.body.copy(body);
    this.entries.set(id, { read: answer.read, body, get: { ...answer.read, bytes: body }, version, storedAt: this.now() });
  }

  /** Body bytes held now. */
  get bytes(): number {
    return this.entries.bytes;
  }
}

const entryId = (bucket: string, key: string) => `${bucket}/${key}`;

/**
 * The object layer with the gateway's answers in front of its reads: the one read path of GetObject
 * and HeadObject. A whole-object read of a small object in the clear is answered from `answers` while
 * its version holds (ObjectAnswerCache), its conditions decided by the object model's rule
 * (`notModified`) as the layer decides them on a miss; what the layer answers a miss is kept, and
 * handed on with its body read whole (`bytes`). Ranges, parts, reads that bring a customer key (the
 * layer judges it) and every other operation go to `inner` unchanged.
 */
export function answeringObjectLayer(inner: ObjectLayer, answers: ObjectAnswerCache): ObjectLayer {
  return {
    ...forwardingLayer(inner),
    getObject: (bucket, key, input, cancellation) =>
      input.range !== undefined || input.partNumber !== undefined || input.sse
        ? inner.getObject(bucket, key, input, cancellation)
        : answeredRead(inner, answers, bucket, key, input, cancellation),
  };
}

async function answeredRead(
  inner: ObjectLayer,
  answers: ObjectAnswerCache,
  bucket: string,
  key: string,
  input: GetObjectInput,
  cancellation: Cancellation | undefined,
): Promise<ObjectRead> {
  // Taken BEFORE the layer is asked: a write that commits after it leaves what is read now unused.
  const version = answers.versionNow(bucket, key) ?? (await answers.version(bucket, key));
  if (version === undefined) return inner.getObject(bucket, key, input, cancellation);
  const cached = answers.get(bucket, key, version);
  if (cached) {
    if (notModified(cached.read.object, input.conditions)) return { status: 304, object: cached.read.object, contentLength: 0 };
    return input.method === 'GET' ? cached.get : cached.read;
  }
  const read = await inner.getObject(bucket, key, input, cancellation);
  if (read.status !== 200 || !read.body || read.object.sse || read.contentLength > answers.maxObjectBytes) return read;
  const { body, ...answer } = read;
  let bytes: Buffer;
  try {
    bytes = await readWhole(body);
  } catch (err) {
    // Cut short upstream: the reader's answer is cut too, as a streamed one would be.
    return { ...answer, body: failing(err) };
  }
  answers.set(bucket, key, version, { read: answer, body: bytes });
  return { ...answer, bytes };
}

/** A body that fails with `err` once it is read (not before: nobody listens yet). */
function failing(err: unknown): Readable {
  return new Readable({
    read() {
      this.destroy(err instanceof Error ? err : new Error(String(err)));
    },
  });
}
