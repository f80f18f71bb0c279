import type { ObjectLayer } from './object-layer.js';

/** Every method of the object layer, once: the compiler rejects a list that misses one or names one it lacks. */
const METHODS = {
  listBuckets: true,
  createBucket: true,
  getBucket: true,
  deleteBucket: true,
  getBucketConfig: true,
  putBucketConfig: true,
  listObjects: true,
  headObject: true,
  objectParts: true,
  putObject: true,
  getObject: true,
  directUrl: true,
  copyObject: true,
  putObjectTags: true,
  putObjectAcl: true,
  deleteObject: true,
  deleteObjects: true,
  createMultipart: true,
  uploadPart: true,
  uploadPartCopy: true,
  listParts: true,
  completeMultipart: true,
  abortMultipart: true,
  listUploads: true,
} satisfies Record<keyof ObjectLayer, true>;

/**
 * An object layer that hands every call to `inner`: the base of a decorator, which replaces the
 * methods it changes (`{ ...forwardingLayer(inner), getObject }`) and passes the rest through unchanged.
 */
export function forwardingLayer(inner: ObjectLayer): ObjectLayer {
  const layer: Record<string, unknown> = {};
  for (const name of Object.keys(METHODS) as Array<keyof ObjectLayer>) layer[name] = inner[name].bind(inner);
  return layer as unknown as ObjectLayer;
}
