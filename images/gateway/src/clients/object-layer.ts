import type { ObjectLayer } from '../../../object-model/src/index.js';
import type { ControlPlaneClient } from './control-plane.js';
import type { DataPlaneClient } from './data-plane.js';

/**
 * The object layer the gateway serves S3 from, over internal HTTP: metadata (buckets, listings, tags,
 * deletes) from the control plane, bytes, copies and multipart uploads from the data plane.
 */
export function httpObjectLayer(controlPlane: ControlPlaneClient, dataPlane: DataPlaneClient): ObjectLayer {
  const cp = controlPlane;
  const dp = dataPlane;
  return {
    listBuckets: cp.listBuckets.bind(cp),
    createBucket: cp.createBucket.bind(cp),
    getBucket: cp.getBucket.bind(cp),
    deleteBucket: cp.deleteBucket.bind(cp),
    getBucketConfig: cp.getBucketConfig.bind(cp),
    putBucketConfig: cp.putBucketConfig.bind(cp),
    listObjects: cp.listObjects.bind(cp),
    headObject: cp.headObject.bind(cp),
    objectParts: cp.objectParts.bind(cp),
    putObjectTags: cp.putObjectTags.bind(cp),
    putObjectAcl: cp.putObjectAcl.bind(cp),
    deleteObject: cp.deleteObject.bind(cp),
    deleteObjects: cp.deleteObjects.bind(cp),
    putObject: dp.putObject.bind(dp),
    getObject: dp.getObject.bind(dp),
    directUrl: dp.directUrl.bind(dp),
    copyObject: dp.copyObject.bind(dp),
    createMultipart: dp.createMultipart.bind(dp),
    uploadPart: dp.uploadPart.bind(dp),
    uploadPartCopy: dp.uploadPartCopy.bind(dp),
    listParts: dp.listParts.bind(dp),
    completeMultipart: dp.completeMultipart.bind(dp),
    abortMultipart: dp.abortMultipart.bind(dp),
    listUploads: dp.listUploads.bind(dp),
  };
}
