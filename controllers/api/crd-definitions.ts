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
  /**
   * What metadata.name must be so that every name derived from it fits: at most maxLength characters
   * (the longest suffix the operator adds still leaves 63), and a DNS-1035 label where it names a Service.
   */
  name: { maxLength: number; dns1035: boolean };
}

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** What is wrong with a resource's name for its kind (undefined: nothing); the CRD carries the same rules. */
export function nameProblem(def: CustomResourceKind, name: string): string | undefined {
  if (name.length > def.name.maxLength)
    return `metadata.name ${name} is longer than ${def.name.maxLength} characters: the names derived from it would exceed 63`;
  if (def.name.dns1035 && !DNS1035.test(name)) return `metadata.name ${name} must start with a letter (it names a Service)`;
  return undefined;
}

/** The CEL rules for metadata.name that the CRD's root schema carries. */
export function nameValidations(def: CustomResourceKind): Array<{ rule: string; message: string }> {
  return [
    {
      rule: `self.metadata.name.size() <= ${def.name.maxLength}`,
      message: `metadata.name may have at most ${def.name.maxLength} characters, so that the names derived from it fit 63`,
    },
    ...(def.name.dns1035
      ? [{ rule: `self.metadata.name.matches('${DNS1035.source}')`, message: 'metadata.name must start with a letter (it names a Service)' }]
      : []),
  ];
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
  // The bucket's name defaults to it: an S3 bucket name has at most 63 characters.
  name: { maxLength: 63, dns1035: false },
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
  // <name>-rebuild-<10 hex> (Jobs, 63) is the longest derived name; <name>-index-worker names a Service.
  name: { maxLength: 44, dns1035: true },
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
  // <name>-model-server names the Deployment and Service.
  name: { maxLength: 50, dns1035: true },
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
