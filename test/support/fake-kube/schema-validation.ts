import { Ajv, type ValidateFunction } from 'ajv';

/**
 * What the API server does with a custom resource's openAPIV3Schema: fill in defaults and reject
 * objects that do not match (422 Invalid). CEL rules (x-kubernetes-validations) are not evaluated.
 */
export class CustomResourceSchemas {
  private readonly ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true });
  private readonly validators = new Map<string, ValidateFunction>();

  /** Remember the schema of every served version of a CRD object. */
  register(crd: { spec: { group: string; names: { kind: string }; versions: Array<{ name: string; schema?: { openAPIV3Schema?: object } }> } }): void {
    for (const v of crd.spec.versions) {
      const schema = v.schema?.openAPIV3Schema;
      if (schema) this.validators.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, this.ajv.compile(schema));
    }
  }

  /** Default `obj` in place; the list of problems (empty when valid). */
  check(apiVersion: string, kind: string, obj: object): string[] {
    const validate = this.validators.get(`${apiVersion}/${kind}`);
    if (!validate || validate(obj)) return [];
    return (validate.errors ?? []).map((e) => `${e.instancePath || '<root>'} ${e.message ?? 'is invalid'}`);
  }
}
