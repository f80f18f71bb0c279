import { z } from 'zod';
import { GROUP, VERSION, nameValidations, type CustomResourceKind } from './crd-definitions.js';

type Schema = Record<string, unknown>;

/**
 * Turn zod's OpenAPI 3.0 output into a Kubernetes structural schema: drop what the API server
 * rejects or does not need ($schema, safe-integer bounds), and turn int-or-string unions into the
 * form Kubernetes expects.
 */
export function toStructuralSchema(input: unknown): Schema {
  if (Array.isArray(input)) return input.map(toStructuralSchema) as unknown as Schema;
  if (input === null || typeof input !== 'object') return input as Schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(input as Schema)) {
    if (key === '$schema') continue;
    if ((key === 'maximum' && value === Number.MAX_SAFE_INTEGER) || (key === 'minimum' && value === Number.MIN_SAFE_INTEGER)) continue;
    if (key === 'properties' || (key === 'additionalProperties' && typeof value === 'object')) {
      out[key] =
        key === 'properties' ? Object.fromEntries(Object.entries(value as Schema).map(([k, v]) => [k, toStructuralSchema(v)])) : toStructuralSchema(value);
      continue;
    }
    out[key] = toStructuralSchema(value);
  }
  if (out['x-kubernetes-int-or-string'] === true) {
    // Structural schemas allow exactly this anyOf under int-or-string, without types or patterns.
    return { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }], ...pick(out, ['description']) };
  }
  return out;
}

function pick(o: Schema, keys: string[]): Schema {
  return Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));
}

/** OpenAPI schema of a kind's spec or status as the CRD carries it (input form: defaults shown, defaulted fields optional). */
export function openApiSchemaOf(type: z.ZodType): Schema {
  return toStructuralSchema(z.toJSONSchema(type, { target: 'openapi-3.0', io: 'input' }));
}

/** Top-level fields every Strata resource must have (the CRD's root schema requires them). */
export const REQUIRED_ROOT_FIELDS = ['spec'] as const;

/** The CustomResourceDefinition object for one kind. */
export function renderCrd(def: CustomResourceKind): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/part-of': 'strata' },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: ['strata'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: [...REQUIRED_ROOT_FIELDS],
              'x-kubernetes-validations': nameValidations(def),
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: openApiSchemaOf(def.spec),
                status: openApiSchemaOf(def.status),
              },
            },
          },
        },
      ],
    },
  };
}
