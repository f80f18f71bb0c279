import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import {
  API_VERSION,
  BUCKET_KIND,
  IMAGE_INDEX_KIND,
  MODEL_SERVER_KIND,
  bucketSpec,
  imageIndexSpec,
  modelServerSpec,
  nameProblem,
  type Bucket,
  type CustomResourceKind,
  type ImageIndex,
  type ModelServer,
} from '../controllers/api/index.js';
import { renderFlowRulesConfigMap, renderStorageStack } from '../controllers/bucket/render-storage-stack.js';
import { backingCredentials, renderStackSecrets } from '../controllers/bucket/stack-secrets.js';
import { STACK } from '../controllers/bucket/stack-names.js';
import { renderImageIndex } from '../controllers/image-index/render-image-index.js';
import { renderModelServer } from '../controllers/model-server/render-model-server.js';
import type { KubeObject, Manifest } from '../controllers/support/kube-client.js';
import { sharedOwnerRefs } from '../controllers/support/ownership.js';
import type { OperatorSettings } from '../controllers/support/settings.js';

/** A resource file the render command cannot use: the message says which document and why. */
export class RenderInputError extends Error {}

/** One rendered object, and whether the operator creates it only when absent (never overwriting it). */
export interface RenderedObject {
  object: Manifest;
  createOnce: boolean;
}

const KINDS: Array<{ def: CustomResourceKind; spec: z.ZodType }> = [
  { def: BUCKET_KIND, spec: bucketSpec },
  { def: IMAGE_INDEX_KIND, spec: imageIndexSpec },
  { def: MODEL_SERVER_KIND, spec: modelServerSpec },
];

interface ParsedResource {
  resource: KubeObject & { spec?: unknown };
  spec: unknown;
}

/** The Strata resources of a multi-document YAML text, checked as the controllers check them. */
export function parseResources(text: string, namespace: string): ParsedResource[] {
  const parsed: ParsedResource[] = [];
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `document ${i + 1}`;
    if (doc.errors.length > 0) throw new RenderInputError(`${where}: not YAML: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return; // an empty document ("---" at the end)
    if (typeof value !== 'object' || Array.isArray(value)) throw new RenderInputError(`${where}: not a Kubernetes object`);
    const obj = value as Partial<KubeObject> & { spec?: unknown };
    const kind = KINDS.find((k) => k.def.kind === obj.kind);
    if (obj.apiVersion !== API_VERSION || !kind) {
      throw new RenderInputError(
        `${where}: ${obj.apiVersion ?? '(no apiVersion)'} ${obj.kind ?? '(no kind)'} is not a Strata resource (${API_VERSION} ` +
          `${KINDS.map((k) => k.def.kind).join(', ')})`,
      );
    }
    const name = obj.metadata?.name;
    if (typeof name !== 'string' || name === '') throw new RenderInputError(`${where}: ${obj.kind} has no metadata.name`);
    const at = `${where} (${obj.kind} ${name})`;
    if (obj.metadata?.namespace !== undefined && obj.metadata.namespace !== namespace) {
      throw new RenderInputError(`${at}: metadata.namespace ${obj.metadata.namespace} differs from --namespace ${namespace}`);
    }
    const badName = nameProblem(kind.def, name);
    if (badName) throw new RenderInputError(`${at}: ${badName}`);
    const spec = kind.spec.safeParse(obj.spec ?? {});
    if (!spec.success) throw new RenderInputError(`${at}: invalid spec: ${spec.error.message}`);
    if (parsed.some((p) => p.resource.kind === obj.kind && p.resource.metadata.name === name)) throw new RenderInputError(`${at}: appears twice`);
    parsed.push({
      resource: { ...obj, apiVersion: API_VERSION, kind: obj.kind, metadata: { ...obj.metadata, name, namespace } } as KubeObject,
      spec: spec.data,
    });
  });
  return parsed;
}

/**
 * What the operator applies in `namespace` for these resources, rendered by the controllers' own
 * functions. The stack's Secrets carry freshly generated values, as the operator generates them when
 * it creates them; resources without a uid get owner references with an empty uid.
 */
export function renderResources(resources: ParsedResource[], namespace: string, settings: OperatorSettings): RenderedObject[] {
  const out: RenderedObject[] = [];
  const buckets = resources.filter((r) => r.resource.kind === BUCKET_KIND.kind).map((r) => r.resource as Bucket);
  if (buckets.length > 0) {
    const secrets = renderStackSecrets(namespace);
    const backing = secrets.find((s) => s.metadata.name === STACK.backingSecret);
    if (!backing) throw new Error(`Secret ${STACK.backingSecret} was not rendered`);
    for (const obj of [...secrets, renderFlowRulesConfigMap(namespace)]) out.push({ object: obj, createOnce: true });
    const stack = renderStorageStack(namespace, sharedOwnerRefs(buckets), settings, backingCredentials(backing as { stringData?: Record<string, string> }));
    for (const obj of stack) out.push({ object: obj, createOnce: false });
  }
  for (const { resource, spec } of resources) {
    if (resource.kind === IMAGE_INDEX_KIND.kind) {
      for (const obj of renderImageIndex(resource as ImageIndex, spec as never, settings)) out.push({ object: obj, createOnce: false });
    } else if (resource.kind === MODEL_SERVER_KIND.kind) {
      for (const obj of renderModelServer(resource as ModelServer, spec as never, settings)) out.push({ object: obj, createOnce: false });
    }
  }
  return out;
}
