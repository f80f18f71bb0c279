import { z } from 'zod';
import { commonStatus, defaultedResources, gpuRequest, type CustomResource } from './common.js';

/** A model server's pods when spec.resources is unset: the built-in models need a few hundred MiB. */
export const MODEL_SERVER_DEFAULT_RESOURCES = { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } };

export const modelServerSpec = z.object({
  model: z
    .object({
      name: z.string().min(1).default('strata-tiny').describe('Model id answered by /v1/models and used in completions.'),
      path: z.string().optional().describe('Path of the ONNX model directory inside the pod; the image default when unset.'),
    })
    .default({ name: 'strata-tiny' })
    .describe('The model to serve.'),
  replicas: z.number().int().min(0).max(100).default(1),
  port: z.number().int().min(1).max(65535).default(8000),
  resources: defaultedResources(MODEL_SERVER_DEFAULT_RESOURCES),
  gpu: gpuRequest.default({ enabled: false, count: 1, resourceName: 'nvidia.com/gpu' }),
  image: z.string().optional().describe('Container image; the operator default when unset.'),
  truncatePrompt: z
    .boolean()
    .default(false)
    .describe("Keep the last tokens of a prompt longer than the model's context (MODEL_SERVER_TRUNCATE_PROMPT) instead of refusing it with 400."),
});

export const modelServerStatus = z.object({
  ...commonStatus,
  replicas: z.number().int().optional(),
  readyReplicas: z.number().int().optional(),
  endpoint: z.string().optional().describe('OpenAI-compatible base URL inside the cluster.'),
});

export type ModelServerSpec = z.infer<typeof modelServerSpec>;
export type ModelServerStatus = z.infer<typeof modelServerStatus>;
export type ModelServer = CustomResource<ModelServerSpec, ModelServerStatus>;
