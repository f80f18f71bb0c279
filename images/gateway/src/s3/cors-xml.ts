import { CORS_METHODS, MAX_CORS_RULES, S3Error, type CorsRule } from '../../../object-model/src/index.js';
import { malformedXml } from './xml.js';

/** S3's `CORSConfiguration` document ⇄ the CorsRule list the services keep, checked as S3 checks it. */

export interface CorsConfigurationXml {
  CORSRule?: unknown;
}

type Group = Record<string, unknown>;

/** A repeated text element (parsed as a list): every entry text. */
function texts(v: unknown, element: string): string[] {
  const list = (v ?? []) as unknown[];
  if (!list.every((e) => typeof e === 'string')) throw malformedXml(`every ${element} is text.`);
  return list as string[];
}

function parseRule(raw: unknown): CorsRule {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw malformedXml('a CORSRule holds elements.');
  const r = raw as Group;
  const allowedOrigins = texts(r.AllowedOrigin, 'AllowedOrigin');
  const allowedMethods = texts(r.AllowedMethod, 'AllowedMethod');
  if (allowedOrigins.length === 0 || allowedMethods.length === 0) throw malformedXml('a CORSRule needs at least one AllowedOrigin and one AllowedMethod.');
  for (const m of allowedMethods) {
    if (!(CORS_METHODS as readonly string[]).includes(m))
      throw new S3Error('InvalidRequest', `Found unsupported HTTP method in CORS config. Unsupported method is ${m}`);
  }
  for (const o of allowedOrigins) {
    if (o.split('*').length > 2) throw new S3Error('InvalidRequest', `AllowedOrigin "${o}" can not have more than one wildcard.`);
  }
  const allowedHeaders = texts(r.AllowedHeader, 'AllowedHeader');
  for (const h of allowedHeaders) {
    if (h.split('*').length > 2) throw new S3Error('InvalidRequest', `AllowedHeader "${h}" can not have more than one wildcard.`);
  }
  const rule: CorsRule = { allowedOrigins, allowedMethods, allowedHeaders, exposeHeaders: texts(r.ExposeHeader, 'ExposeHeader') };
  if (r.ID !== undefined) {
    if (typeof r.ID !== 'string' || r.ID.length > 255) throw malformedXml('ID is text of at most 255 characters.');
    rule.id = r.ID;
  }
  if (r.MaxAgeSeconds !== undefined) {
    if (typeof r.MaxAgeSeconds !== 'string' || !/^\d{1,9}$/.test(r.MaxAgeSeconds)) throw malformedXml('MaxAgeSeconds is a whole number of seconds.');
    rule.maxAgeSeconds = Number(r.MaxAgeSeconds);
  }
  return rule;
}

/** The rules of a CORSConfiguration document (already parsed from XML). */
export function parseCorsConfiguration(doc: CorsConfigurationXml): CorsRule[] {
  const rules = (doc.CORSRule ?? []) as unknown[];
  if (rules.length === 0) throw malformedXml('a CORS configuration has at least one CORSRule.');
  if (rules.length > MAX_CORS_RULES) throw new S3Error('InvalidRequest', `A CORS configuration has at most ${MAX_CORS_RULES} rules.`);
  return rules.map(parseRule);
}

/** The CORSConfiguration document's body for a list of rules. */
export function renderCorsConfiguration(rules: readonly CorsRule[]): Record<string, unknown> {
  return {
    CORSRule: rules.map((r) => ({
      ID: r.id,
      AllowedHeader: r.allowedHeaders,
      AllowedMethod: r.allowedMethods,
      AllowedOrigin: r.allowedOrigins,
      ExposeHeader: r.exposeHeaders,
      MaxAgeSeconds: r.maxAgeSeconds,
    })),
  };
}
