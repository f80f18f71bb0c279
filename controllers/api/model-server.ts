import { z } from 'zod';
import { commonStatus, defaultedResources, gpuRequest, type CustomResource } from './common.js';

/** A model server's pods when spec.resources is unset: the built-in models need a few hundred MiB. */
export const MODEL_SERVER_DEFAULT_RESOURCES = { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } };

/** The models built into the model-server image (its served-models.ts BUILT_IN_MODELS; a test keeps the two equal). */
export const BUILT_IN_MODEL_NAMES: readonly string[] = ['strata-verse', 'strata-tiny'];
/** The model a ModelServer serves when it names none: the built-in one that writes text (verse). */
export const DEFAULT_SERVED_MODEL = 'strata-verse';

const celList = (items: readonly string[]) => `[${items.map((i) => `'${i}'`).join(', ')}]`;

export const modelServerSpec = z.object({
  model: z
    .object({
      name: z
        .string()
        .min(1)
        .default(DEFAULT_SERVED_MODEL)
        .describe(
          `Model id answered by /v1/models and used in completions; without path one of the image's built-in models (${BUILT_IN_MODEL_NAMES.join(', ')}).`,
        ),
      path: z
        .string()
        .optional()
        .describe("Path of the ONNX model directory inside the pod, for a model that is not built in; a built-in model's name always loads its own weights."),
    })
    .refine((m) => (m.path === undefined) === BUILT_IN_MODEL_NAMES.includes(m.name), {
      message: `model: without path, name is a built-in model (${BUILT_IN_MODEL_NAMES.join(', ')}); with path, a name of your own (built-in names load only their own weights)`,
    })
    .meta({
      'x-kubernetes-validations': [
        {
          rule: `has(self.path) ? !(self.name in ${celList(BUILT_IN_MODEL_NAMES)}) : self.name in ${celList(BUILT_IN_MODEL_NAMES)}`,
          message: `without path, name is a built-in model (${BUILT_IN_MODEL_NAMES.join(', ')}); with path, a name of your own (built-in names load only their own weights)`,
        },
      ],
    })
    .default({ name: DEFAULT_SERVED_MODEL })
    .describe('The model to serve.'),
  replicas: z.number().int().min(0).max(100).default(1),
  port: z.number().int().min(1).max(65535).default(8000),
  resources: defaultedResources(MODEL_SERVER_DEFAULT_RESOURCES),
  gpu: gpuRequest.default({ enabled: false, count: 1, resourceName: 'nvidia.com/gpu' }),
  image: z.string().optional().describe('Container image; the operator default when unset.'),
  truncatePrompt: z
    .boolean()
    .default(true)
    .describe(
      "Keep the last tokens of a prompt longer than the model's context (MODEL_SERVER_TRUNCATE_PROMPT) instead of refusing it with 400; on by default, as the built-in models' 64-token context is shorter than the poem app's prompts.",
    ),
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
