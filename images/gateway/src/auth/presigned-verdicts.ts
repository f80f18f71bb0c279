import type { SigV4Request, SigV4Result } from './sigv4-verify.js';

/**
 * Presigned URLs whose signature was found good lately, with every input the signature was computed
 * over: a URL fetched again (a hot object's link, a page's images) is not hashed and signed anew.
 *
 * A signature is a pure function of the method, the target (path and query, the signature's own
 * pair aside), the values of the headers it signs, the payload hash and the signer's secret: a kept
 * verdict is used only when all of them are the ones it was computed from (the target and method
 * exactly, each signed header's value and x-amz-content-sha256 as received, the secret the credential
 * lookup answers NOW), so it answers what recomputing would. What depends on the moment or on the rest
 * of the request is checked on every request, in verification's order: not yet valid or expired, every
 * x-amz-* / x-service-* header signed, the access key still known. Only good verdicts are kept, at most
 * MAX_KEPT URLs (all forgotten when full).
 */
export interface KeptVerdict {
  method: string;
  region: string;
  /** The signed headers (lower case), their values as received, and x-amz-content-sha256 as received. */
  signedHeaders: readonly string[];
  values: readonly string[];
  payloadHeader: string | undefined;
  accessKey: string;
  secretKey: string;
  /** X-Amz-Date as a time, and X-Amz-Expires in seconds. */
  dateMs: number;
  expiresSeconds: number;
  /** The verification's answer but its credential (the lookup's current one is answered). */
  result: Omit<SigV4Result, 'credential'>;
  /** The answer given last, with the credential it was given with. */
  answered?: SigV4Result;
}

const MAX_KEPT = 4096;
const kept = new Map<string, KeptVerdict>();

/** The signed headers' values as received, when each is one text (else undefined: nothing is kept). */
export function signedHeaderValues(req: SigV4Request, signedHeaders: readonly string[]): string[] | undefined {
  const values: string[] = [];
  for (const name of signedHeaders) {
    const v = req.headers[name];
    if (typeof v !== 'string') return undefined;
    values.push(v);
  }
  return values;
}

/** The verdict kept for this request's method, target, region, signed header values and payload hash, if any. */
export function keptVerdict(req: SigV4Request, region: string, payloadHeader: string | undefined): KeptVerdict | undefined {
  const verdict = kept.get(req.url);
  if (verdict === undefined || verdict.method !== req.method || verdict.region !== region || verdict.payloadHeader !== payloadHeader) return undefined;
  for (let i = 0; i < verdict.signedHeaders.length; i++) if (req.headers[verdict.signedHeaders[i]!] !== verdict.values[i]) return undefined;
  return verdict;
}

/**
 * The verdict's answer with `credential`, the lookup's current one: the same object as last time while the
 * lookup answers the same credential (its cache holds it), so a hot URL's callers share one answer.
 */
export function verdictAnswer(verdict: KeptVerdict, credential: SigV4Result['credential']): SigV4Result {
  const last = verdict.answered;
  if (last !== undefined && last.credential === credential) return last;
  return (verdict.answered = { ...verdict.result, credential });
}

/** Keep a good verdict of the presigned URL `url`. */
export function keepVerdict(url: string, verdict: KeptVerdict): void {
  if (kept.size >= MAX_KEPT) kept.clear();
  kept.set(url, verdict);
}

/** Forget every kept verdict (tests). */
export function forgetVerdicts(): void {
  kept.clear();
}
