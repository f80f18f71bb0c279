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
  REQUIRED_ROOT_FIELDS,
  type Bucket,
  type CustomResourceKind,
  type ImageIndex,
  type ModelServer,
} from '../controllers/api/index.js';
import { renderFlowRulesConfigMap, renderStorageStack } from '../controllers/bucket/render-storage-stack.js';
import { backingCredentials, renderStackSecrets } from '../controllers/bucket/stack-secrets.js';
import { STACK } from '../controllers/bucket/stack-names.js';
import { stackSettingsFor } from '../controllers/bucket/plane-replicas.js';
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

/** What a resource file holds: Strata resources, and objects of other kinds (passed through as given). */
export interface ParsedInput {
  resources: ParsedResource[];
  foreign: Manifest[];
}

/**
 * `generate`: the stack's Secrets with fresh values, as the operator creates them (they differ on
 * every render). `omit`: no Secret the operator generates or derives from generated values, so that
 * the output is the same on every render and applying it never rotates a credential.
 */
export type SecretsMode = 'omit' | 'generate';
export const SECRETS_MODES: readonly SecretsMode[] = ['omit', 'generate'];

/**
 * The Strata resources of a multi-document YAML text, checked as the API server checks them against
 * the CRDs (whose schemas are generated from the same zod schemas) and as the controllers check them.
 */
export function parseResources(text: string, namespace: string): ParsedInput {
  const parsed: ParsedResource[] = [];
  const foreign: Manifest[] = [];
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `document ${i + 1}`;
    if (doc.errors.length > 0) throw new RenderInputError(`${where}: not YAML: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return; // an empty document ("---" at the end)
    if (typeof value !== 'object' || Array.isArray(value)) throw new RenderInputError(`${where}: not a Kubernetes object`);
    const obj = value as Partial<KubeObject> & { spec?: unknown };
    if (obj.apiVersion !== API_VERSION) {
      if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string')
        throw new RenderInputError(`${where}: not a Kubernetes object (no apiVersion or kind)`);
      // Namespaced as the file's Strata resources are (they refer to one another by name).
      if (obj.metadata?.namespace !== undefined && obj.metadata.namespace !== namespace)
        throw new RenderInputError(`${where} (${obj.kind}): metadata.namespace ${obj.metadata.namespace} differs from --namespace ${namespace}`);
      foreign.push({ ...obj, metadata: { ...obj.metadata, namespace } } as Manifest);
      return;
    }
    const kind = KINDS.find((k) => k.def.kind === obj.kind);
    if (!kind) {
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
    const missing = REQUIRED_ROOT_FIELDS.filter((f) => obj[f] === undefined || obj[f] === null);
    if (missing.length) throw new RenderInputError(`${at}: ${missing.join(', ')}: Required value`);
    const spec = kind.spec.safeParse(obj.spec);
    if (!spec.success) throw new RenderInputError(`${at}: invalid spec: ${spec.error.message}`);
    if (parsed.some((p) => p.resource.kind === obj.kind && p.resource.metadata.name === name)) throw new RenderInputError(`${at}: appears twice`);
    parsed.push({
      resource: { ...obj, apiVersion: API_VERSION, kind: obj.kind, metadata: { ...obj.metadata, name, namespace } } as KubeObject,
      spec: spec.data,
    });
  });
  return { resources: parsed, foreign };
}

/**
 * What the operator applies in `namespace` for these resources, rendered by the controllers' own
 * functions. Owner references go only to resources with a uid (an API server refuses an empty one;
 * the operator adds them when it reconciles). Secrets: see SecretsMode.
 */
export function renderResources(resources: ParsedResource[], namespace: string, settings: OperatorSettings, secrets: SecretsMode = 'omit'): RenderedObject[] {
  const out: RenderedObject[] = [];
  const buckets = resources.filter((r) => r.resource.kind === BUCKET_KIND.kind).map((r) => r.resource as Bucket);
  if (buckets.length > 0) {
    const generated = renderStackSecrets(namespace);
    const backing = generated.find((s) => s.metadata.name === STACK.backingSecret);
    if (!backing) throw new Error(`Secret ${STACK.backingSecret} was not rendered`);
    for (const obj of [...generated, renderFlowRulesConfigMap(namespace)]) out.push({ object: obj, createOnce: true });
    const stack = renderStorageStack(
      namespace,
      sharedOwnerRefs(buckets),
      stackSettingsFor(settings, buckets),
      backingCredentials(backing as { stringData?: Record<string, string> }),
    );
    for (const obj of stack) out.push({ object: obj, createOnce: false });
  }
  for (const { resource, spec } of resources) {
    if (resource.kind === IMAGE_INDEX_KIND.kind) {
      for (const obj of renderImageIndex(resource as ImageIndex, spec as never, settings)) out.push({ object: obj, createOnce: false });
    } else if (resource.kind === MODEL_SERVER_KIND.kind) {
      for (const obj of renderModelServer(resource as ModelServer, spec as never, settings)) out.push({ object: obj, createOnce: false });
    }
  }
  return out
    .filter(({ object }) => secrets === 'generate' || object.kind !== 'Secret')
    .map(({ object, createOnce }) => ({ object: withoutUidlessOwners(object), createOnce }));
}

/** The Secrets `--secrets=omit` leaves out of what renderResources would render for these resources. */
export function omittedSecrets(resources: ParsedResource[], namespace: string, settings: OperatorSettings): string[] {
  return renderResources(resources, namespace, settings, 'generate')
    .filter(({ object }) => object.kind === 'Secret')
    .map(({ object }) => object.metadata.name);
}

function withoutUidlessOwners(object: Manifest): Manifest {
  const owners = object.metadata.ownerReferences;
  if (!owners) return object;
  const kept = owners.filter((o) => o.uid);
  const { ownerReferences: _dropped, ...rest } = object.metadata;
  return { ...object, metadata: kept.length ? { ...rest, ownerReferences: kept } : rest };
}
