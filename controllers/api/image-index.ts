import { z } from 'zod';
import { commonStatus, defaultedResources, gpuRequest, type CustomResource } from './common.js';

/** An index worker's pods when spec.resources is unset: the CLIP model and the FAISS index in memory. */
export const INDEX_WORKER_DEFAULT_RESOURCES = { requests: { cpu: '500m', memory: '1Gi' }, limits: { memory: '4Gi' } };

const oneOfPathOrBucket = (what: string) => [{ rule: 'has(self.directory) != has(self.bucket)', message: `${what}: set exactly one of directory or bucket` }];

export const imageSource = z
  .object({
    directory: z.string().optional().describe('Directory of images inside the worker (e.g. a mounted volume).'),
    bucket: z.string().optional().describe('Strata bucket holding the images.'),
    prefix: z.string().default('').describe('Key prefix inside the bucket.'),
    volumeClaimName: z.string().optional().describe('PVC mounted read-only at the directory.'),
  })
  .meta({ 'x-kubernetes-validations': oneOfPathOrBucket('source') })
  .describe('Where the images come from: a directory or a bucket prefix.');

export const modelSource = z
  .object({
    directory: z.string().optional().describe('Directory holding the CLIP ONNX files inside the worker.'),
    bucket: z.string().optional().describe('Strata bucket holding the CLIP ONNX files.'),
    prefix: z.string().default('').describe('Key prefix of the model files inside the bucket.'),
    volumeClaimName: z.string().optional().describe('PVC mounted read-only at the directory.'),
  })
  .meta({ 'x-kubernetes-validations': oneOfPathOrBucket('model') })
  .describe('Where the CLIP image and text encoders come from.');

export const imageIndexSpec = z.object({
  source: imageSource,
  model: modelSource,
  index: z.string().min(1).default('IVF4096,PQ32x8').describe('FAISS index factory string of the main index.'),
  nprobe: z.number().int().min(1).max(65536).default(16).describe('IVF lists visited per search.'),
  topk: z.number().int().min(1).max(1000).default(20).describe('Results per search by default.'),
  bufferThreshold: z.number().int().min(1).default(1000).describe('Buffered vectors that trigger an automatic merge.'),
  autoMerge: z.boolean().default(true).describe('Run a merge Job when the buffer exceeds bufferThreshold.'),
  gpu: gpuRequest.default({ enabled: false, count: 1, resourceName: 'nvidia.com/gpu' }),
  resources: defaultedResources(INDEX_WORKER_DEFAULT_RESOURCES),
  storage: z
    .object({
      size: z.string().default('10Gi').describe('Size of the index state volume.'),
      storageClassName: z.string().optional(),
    })
    .default({ size: '10Gi' })
    .describe('The PersistentVolumeClaim that keeps the index state.'),
  image: z.string().optional().describe('Index worker image (e.g. one built with CUDA for GPU workers); the operator default when unset.'),
  mergeRequest: z.string().optional().describe('Set or change to any new value to run a merge Job once.'),
  rebuildRequest: z.string().optional().describe('Set or change to any new value to run a rebuild Job once.'),
});

export const imageIndexStatus = z.object({
  ...commonStatus,
  endpoint: z.string().optional().describe('HTTP URL of the index worker.'),
  vectors: z.number().int().optional().describe('Vectors searchable (main index + buffer - deleted).'),
  bufferSize: z.number().int().optional().describe('Vectors in the buffer waiting for a merge.'),
  lastMergeTime: z.string().optional(),
  activeJob: z.string().optional().describe('Name of the running merge or rebuild Job.'),
  sourceCredentials: z.string().optional().describe("The Secret with the worker's access key: read-only, scoped to the source (and model) bucket and prefix."),
  sourceAccessKey: z.string().optional().describe("The access key id of the worker's scoped read-only key."),
  handledMergeRequest: z.string().optional().describe('The last mergeRequest value a Job was run for.'),
  handledRebuildRequest: z.string().optional().describe('The last rebuildRequest value a Job was run for.'),
  jobCount: z
    .number()
    .int()
    .optional()
    .describe("Merge and rebuild Jobs of this index that exist (a request's Job is kept as the record that it was handled)."),
});

export type ImageIndexSpec = z.infer<typeof imageIndexSpec>;
export type ImageIndexStatus = z.infer<typeof imageIndexStatus>;
export type ImageIndex = CustomResource<ImageIndexSpec, ImageIndexStatus>;
