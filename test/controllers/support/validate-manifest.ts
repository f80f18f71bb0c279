import { Ajv } from 'ajv';
import { CUSTOM_RESOURCE_KINDS, API_VERSION, renderCrd } from '../../../controllers/api/index.js';

interface Manifest {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
}

const ajv = new Ajv({ strict: false, allErrors: true });
// Strata's own kinds are checked against the generated CRD schema (what the API server would do).
const crdValidators = new Map(
  CUSTOM_RESOURCE_KINDS.map((def) => {
    const crd = renderCrd(def) as { spec: { versions: Array<{ schema: { openAPIV3Schema: object } }> } };
    return [def.kind, ajv.compile(crd.spec.versions[0]!.schema.openAPIV3Schema)] as const;
  }),
);

/** Where kubernetes-models keeps the model class of an apiVersion/kind ("apps/v1" → "apps/v1/Kind"). */
function modelPath(apiVersion: string, kind: string): string {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/**
 * Validate a manifest against the official Kubernetes OpenAPI schema of its kind (kubernetes-models
 * validators), or against the generated CRD schema for Strata kinds. Throws with the details.
 */
export async function validateManifest(obj: Manifest): Promise<void> {
  const { apiVersion, kind } = obj;
  const where = `${kind ?? '?'} ${obj.metadata?.name ?? '?'}`;
  if (!apiVersion || !kind) throw new Error(`${where}: apiVersion and kind are required`);
  if (apiVersion === API_VERSION) {
    const validate = crdValidators.get(kind);
    if (!validate) throw new Error(`${where}: unknown Strata kind`);
    if (!validate(obj)) throw new Error(`${where}: ${ajv.errorsText(validate.errors)}`);
    return;
  }
  if (apiVersion === 'monitoring.coreos.com/v1' && kind === 'ServiceMonitor') {
    // Not a core kind: kubernetes-models has no schema for it; check the fields Prometheus needs.
    const spec = (obj as { spec?: { endpoints?: unknown[]; selector?: object } }).spec;
    if (!spec?.selector || !Array.isArray(spec.endpoints) || spec.endpoints.length === 0) throw new Error(`${where}: selector and endpoints required`);
    return;
  }
  let mod: Record<string, new (data: unknown) => { validate(): void }>;
  try {
    mod = (await import(modelPath(apiVersion, kind))) as typeof mod;
  } catch {
    throw new Error(`${where}: no Kubernetes schema for ${apiVersion} ${kind}`);
  }
  const Model = mod[kind] ?? (mod.default as unknown as Record<string, new (data: unknown) => { validate(): void }>)?.[kind];
  if (!Model) throw new Error(`${where}: no model class for ${kind}`);
  try {
    new Model(obj).validate();
  } catch (err) {
    throw new Error(`${where}: ${err instanceof Error ? err.message : String(err)}`);
  }
}
