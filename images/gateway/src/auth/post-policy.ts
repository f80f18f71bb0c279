import { S3Error } from '../../../object-model/src/index.js';
import { parseCredential, type Credential, type CredentialLookup } from './sigv4-verify.js';
import { ALGORITHM, parseAmzDate, sign, signaturesEqual, signingKey } from './sigv4.js';
import { signatureDoesNotMatch, signatureV2Off, signV2 } from './sigv2.js';

/**
 * Browser form uploads (S3 "POST Object"): the form carries a policy document (base64 JSON: an
 * expiration and conditions on the form's fields) signed by someone holding the keys,
 * usually an application server. The upload is allowed when the signature holds, the policy has not
 * expired, every condition holds and every field the form sends is covered by a condition. The form
 * may be signed with SigV4 (x-amz-* fields) or, unless turned off, SigV2 (AWSAccessKeyId, signature).
 */

/** Form fields that no condition needs to name (S3's rule, per signature version), besides `x-ignore-*`. */
const UNCONDITIONED_V4 = new Set(['x-amz-signature', 'file', 'policy']);
const UNCONDITIONED_V2 = new Set(['awsaccesskeyid', 'signature', 'file', 'policy']);

export interface VerifiedPolicy {
  credential: Credential;
  /** content-length-range, when the policy sets one: the file's size must lie within (inclusive). */
  sizeRange?: { min: number; max: number };
}

export interface PostPolicyOptions {
  /** Whether forms signed with Signature Version 2 are accepted (STRATA_SIGV2). */
  signatureV2: boolean;
  now?: Date;
}

type Condition = { kind: 'eq' | 'starts-with'; field: string; value: string } | { kind: 'content-length-range'; min: number; max: number };

/** The SigV4 form: x-amz-algorithm, -credential, -date and -signature, the signature over the policy with the derived key. */
async function verifyV4Signature(fields: ReadonlyMap<string, string>, policy: string, lookup: CredentialLookup, region: string): Promise<Credential> {
  const required = ['x-amz-algorithm', 'x-amz-credential', 'x-amz-date', 'x-amz-signature'].filter((f) => !fields.get(f));
  if (required.length > 0) throw new S3Error('InvalidArgument', `Bucket POST must contain the fields ${required.join(', ')}.`);
  if (fields.get('x-amz-algorithm') !== ALGORITHM) throw new S3Error('InvalidArgument', `x-amz-algorithm must be ${ALGORITHM}.`);
  const scope = parseCredential(fields.get('x-amz-credential')!);
  if (scope.region !== region || scope.service !== 's3')
    throw new S3Error('InvalidArgument', `The credential's scope must be <date>/${region}/s3/aws4_request.`);
  const amzDate = fields.get('x-amz-date')!;
  if (!parseAmzDate(amzDate) || amzDate.slice(0, 8) !== scope.date)
    throw new S3Error('InvalidArgument', 'x-amz-date must be YYYYMMDDTHHMMSSZ, on the date of the credential.');

  const credential = await lookup(scope.accessKey);
  const expected = sign(signingKey(credential.secretKey, scope.date, scope.region, scope.service), policy);
  if (!signaturesEqual(expected, fields.get('x-amz-signature')!)) throw new S3Error('SignatureDoesNotMatch', undefined, { AWSAccessKeyId: scope.accessKey });
  return credential;
}

/** The SigV2 form: AWSAccessKeyId and signature, base64(HMAC-SHA1(secret, policy)). */
async function verifyV2Signature(fields: ReadonlyMap<string, string>, policy: string, lookup: CredentialLookup): Promise<Credential> {
  const accessKey = fields.get('awsaccesskeyid')!;
  const signature = fields.get('signature');
  if (!signature) throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'Signature'.", { ArgumentName: 'Signature' });
  const credential = await lookup(accessKey);
  if (!signaturesEqual(signV2(credential.secretKey, policy), signature)) throw signatureDoesNotMatch(accessKey, policy, signature);
  return credential;
}

/** Check a form's policy and signature; `fields` by lower-cased name, `bucket` from the request path. */
export async function verifyPostPolicy(
  fields: ReadonlyMap<string, string>,
  bucket: string,
  lookup: CredentialLookup,
  region: string,
  opts: PostPolicyOptions,
): Promise<VerifiedPolicy> {
  const now = opts.now ?? new Date();
  const v2 = fields.has('awsaccesskeyid');
  if (v2 && ['x-amz-algorithm', 'x-amz-credential', 'x-amz-signature'].some((f) => fields.has(f))) {
    throw new S3Error('InvalidArgument', 'Only one auth mechanism allowed; the form carries both AWSAccessKeyId and X-Amz-Credential.', {
      ArgumentName: 'AWSAccessKeyId',
    });
  }
  if (v2 && !opts.signatureV2) throw signatureV2Off();
  const policy = fields.get('policy');
  if (policy === undefined) {
    if (v2) throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'policy'.", { ArgumentName: 'policy' });
    throw new S3Error('AccessDenied', 'A signed form needs its policy: the form names a credential but carries no policy.');
  }
  // Only the signature differs between the versions; the policy is checked alike.
  const credential = v2 ? await verifyV2Signature(fields, policy, lookup) : await verifyV4Signature(fields, policy, lookup, region);
  const unconditioned = v2 ? UNCONDITIONED_V2 : UNCONDITIONED_V4;

  const { expiration, conditions } = parsePolicy(policy);
  if (expiration.getTime() < now.getTime()) throw new S3Error('AccessDenied', 'Invalid according to Policy: Policy expired.');
  const valueOf = (field: string) => (field === 'bucket' ? bucket : (fields.get(field) ?? ''));
  let sizeRange: VerifiedPolicy['sizeRange'];
  const named = new Set<string>();
  for (const c of conditions) {
    if (c.kind === 'content-length-range') {
      sizeRange = { min: c.min, max: c.max };
      continue;
    }
    named.add(c.field);
    const actual = valueOf(c.field);
    if (c.kind === 'eq' ? actual !== c.value : !actual.startsWith(c.value)) {
      throw new S3Error('AccessDenied', `Invalid according to Policy: Policy Condition failed: ["${c.kind}", "$${c.field}", ${JSON.stringify(c.value)}]`);
    }
  }
  const extra = [...fields.keys()].filter((f) => !unconditioned.has(f) && !f.startsWith('x-ignore-') && !named.has(f));
  if (extra.length > 0) throw new S3Error('AccessDenied', `Invalid according to Policy: Extra input fields: ${extra.join(', ')}`);
  return { credential, ...(sizeRange ? { sizeRange } : {}) };
}

function invalidPolicy(why: string): S3Error {
  return new S3Error('InvalidPolicyDocument', `Invalid Policy: ${why}`);
}

/** The policy document: `{"expiration": ISO date, "conditions": [...]}`, each condition in one of S3's three forms. */
function parsePolicy(base64: string): { expiration: Date; conditions: Condition[] } {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(base64, 'base64').toString('utf8'));
  } catch {
    throw invalidPolicy('Invalid JSON.');
  }
  const { expiration, conditions } = (doc ?? {}) as { expiration?: unknown; conditions?: unknown };
  // An ISO 8601 date and time (`2026-11-26T13:00:00.000Z`), as S3 requires: not just anything Date parses.
  const iso = typeof expiration === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$/.test(expiration);
  const when = iso ? new Date(expiration) : undefined;
  if (!when || Number.isNaN(when.getTime())) throw invalidPolicy('Policy missing expiration, or it is not an ISO 8601 date.');
  if (!Array.isArray(conditions)) throw invalidPolicy('Policy missing conditions.');
  return { expiration: when, conditions: conditions.map(parseCondition) };
}

function parseCondition(c: unknown): Condition {
  const field = (name: unknown) => {
    if (typeof name !== 'string' || !name.startsWith('$')) throw invalidPolicy(`Invalid condition: ${JSON.stringify(c)}.`);
    return name.slice(1).toLowerCase();
  };
  if (Array.isArray(c)) {
    const [op, a, b] = c as unknown[];
    const kind = typeof op === 'string' ? op.toLowerCase() : op;
    if (kind === 'content-length-range' && Number.isInteger(a) && Number.isInteger(b) && (a as number) >= 0 && (b as number) >= (a as number))
      return { kind, min: a as number, max: b as number };
    if ((kind === 'eq' || kind === 'starts-with') && typeof b === 'string' && c.length === 3) return { kind, field: field(a), value: b };
    throw invalidPolicy(`Invalid condition: ${JSON.stringify(c)}.`);
  }
  if (c && typeof c === 'object' && Object.keys(c).length === 1) {
    const [name, value] = Object.entries(c)[0]!;
    if (typeof value === 'string') return { kind: 'eq', field: name.toLowerCase(), value };
  }
  throw invalidPolicy(`Invalid condition: ${JSON.stringify(c)}.`);
}
