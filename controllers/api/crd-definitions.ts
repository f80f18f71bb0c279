import { z } from 'zod';
import { GROUP, VERSION } from './common.js';
import { bucketSpec, bucketStatus } from './bucket.js';
import { imageIndexSpec, imageIndexStatus } from './image-index.js';
import { modelServerSpec, modelServerStatus } from './model-server.js';

/** What the CRD generator and the operator need to know about one custom resource kind. */
export interface CustomResourceKind {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: Array<{ name: string; type: 'string' | 'integer' | 'date' | 'boolean'; jsonPath: string; description?: string; priority?: number }>;
}

const readyColumn = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' } as const;
const ageColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' } as const;

export const BUCKET_KIND: CustomResourceKind = {
  kind: 'Bucket',
  plural: 'buckets',
  singular: 'bucket',
  shortNames: ['sbk'],
  spec: bucketSpec,
  status: bucketStatus,
  printerColumns: [
    { name: 'Backend', type: 'string', jsonPath: '.spec.backend.kind' },
    { name: 'Policy', type: 'string', jsonPath: '.spec.deletionPolicy' },
    { name: 'Objects', type: 'integer', jsonPath: '.status.objectCount' },
    { name: 'Bytes', type: 'integer', jsonPath: '.status.bytes', priority: 1 },
    readyColumn,
    { name: 'Endpoint', type: 'string', jsonPath: '.status.endpoint', priority: 1 },
    ageColumn,
  ],
};

export const IMAGE_INDEX_KIND: CustomResourceKind = {
  kind: 'ImageIndex',
  plural: 'imageindexes',
  singular: 'imageindex',
  shortNames: ['imgidx'],
  spec: imageIndexSpec,
  status: imageIndexStatus,
  printerColumns: [
    { name: 'Index', type: 'string', jsonPath: '.spec.index' },
    { name: 'Vectors', type: 'integer', jsonPath: '.status.vectors' },
    { name: 'Buffer', type: 'integer', jsonPath: '.status.bufferSize' },
    readyColumn,
    { name: 'Last-Merge', type: 'date', jsonPath: '.status.lastMergeTime', priority: 1 },
    ageColumn,
  ],
};

export const MODEL_SERVER_KIND: CustomResourceKind = {
  kind: 'ModelServer',
  plural: 'modelservers',
  singular: 'modelserver',
  shortNames: ['msrv'],
  spec: modelServerSpec,
  status: modelServerStatus,
  printerColumns: [
    { name: 'Model', type: 'string', jsonPath: '.spec.model.name' },
    { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
    { name: 'Ready-Replicas', type: 'integer', jsonPath: '.status.readyReplicas' },
    readyColumn,
    { name: 'Endpoint', type: 'string', jsonPath: '.status.endpoint', priority: 1 },
    ageColumn,
  ],
};

export const CUSTOM_RESOURCE_KINDS = [BUCKET_KIND, IMAGE_INDEX_KIND, MODEL_SERVER_KIND];
export { GROUP, VERSION };
