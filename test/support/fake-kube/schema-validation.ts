import { isDeepStrictEqual } from 'node:util';
import { Ajv, type ValidateFunction } from 'ajv';

/**
 * What the API server does with a custom resource's openAPIV3Schema: fill in defaults and reject
 * objects that do not match (422 Invalid). Of the CEL rules (x-kubernetes-validations) only the
 * transition rules Strata's CRDs use are evaluated: `self == oldSelf` and `has(self.f) == has(oldSelf.f)`.
 */
export class CustomResourceSchemas {
  private readonly ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true });
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly schemas = new Map<string, Schema>();

  /** Remember the schema of every served version of a CRD object. */
  register(crd: { spec: { group: string; names: { kind: string }; versions: Array<{ name: string; schema?: { openAPIV3Schema?: object } }> } }): void {
    for (const v of crd.spec.versions) {
      const schema = v.schema?.openAPIV3Schema;
      if (!schema) continue;
      this.validators.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, this.ajv.compile(schema));
      this.schemas.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, schema as Schema);
    }
  }

  /** Default `obj` in place; the list of problems (empty when valid). */
  check(apiVersion: string, kind: string, obj: object): string[] {
    const validate = this.validators.get(`${apiVersion}/${kind}`);
    if (!validate || validate(obj)) return [];
    return (validate.errors ?? []).map((e) => `${e.instancePath || '<root>'} ${e.message ?? 'is invalid'}`);
  }

  /** The transition rules an update breaks, as the API server words them. */
  transitionProblems(apiVersion: string, kind: string, oldObj: object, newObj: object): string[] {
    const schema = this.schemas.get(`${apiVersion}/${kind}`);
    return schema ? transitionProblems(schema, oldObj, newObj, '') : [];
  }
}

interface Schema {
  properties?: Record<string, Schema>;
  'x-kubernetes-validations'?: Array<{ rule: string; message?: string }>;
}

const HAS_RULE = /^has\(self\.(\w+)\) == has\(oldSelf\.(\w+)\)$/;

/** Transition rules apply where the value exists in both the old and the new object. */
function transitionProblems(schema: Schema, oldValue: unknown, newValue: unknown, path: string): string[] {
  if (oldValue === undefined || newValue === undefined) return [];
  const problems: string[] = [];
  for (const { rule, message } of schema['x-kubernetes-validations'] ?? []) {
    const has = HAS_RULE.exec(rule);
    const broken =
      rule === 'self == oldSelf'
        ? !isDeepStrictEqual(oldValue, newValue)
        : has && has[1] === has[2]
          ? isObject(oldValue) && isObject(newValue) && has[1]! in oldValue !== has[1]! in newValue
          : false;
    if (broken) problems.push(`${path || '<root>'}: Invalid value: ${message ?? `failed rule: ${rule}`}`);
  }
  if (isObject(oldValue) && isObject(newValue)) {
    for (const [key, sub] of Object.entries(schema.properties ?? {}))
      problems.push(...transitionProblems(sub, oldValue[key], newValue[key], `${path}.${key}`.replace(/^\./, '')));
  }
  return problems;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
