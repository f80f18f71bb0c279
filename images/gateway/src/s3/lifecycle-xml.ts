import { randomUUID } from 'node:crypto';
import { MAX_LIFECYCLE_RULES, S3Error, type LifecycleFilter, type LifecycleRule } from '../../../object-model/src/index.js';
import { malformedXml, xmlGroup, xmlText } from './xml.js';

/**
 * S3's `LifecycleConfiguration` document ⇄ the LifecycleRule list the services keep. Parsing checks
 * what S3 checks and refuses with its errors; transitions (storage classes) are NotImplemented:
 * Strata has one storage class.
 */

/** The parsed document: elements are text, groups (objects) or, for repeated ones, lists; checked as read. */
type Element = unknown;
type Group = Record<string, Element>;

export interface LifecycleConfigurationXml {
  Rule?: Element;
}

const MAX_ID_LENGTH = 255;
const MAX_PREFIX_BYTES = 1024;

/** A whole number in [min, max], or the S3 error for the element. */
function wholeNumber(v: Element, element: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = xmlText(v, element);
  if (raw === undefined || !/^\d+$/.test(raw)) throw malformedXml(`${element} must be a whole number.`);
  const n = Number(raw);
  if (n < min || n > max)
    throw new S3Error(
      'InvalidArgument',
      `'${element}' must be ${min === 1 ? 'a positive integer' : `at least ${min}`}${max < Number.MAX_SAFE_INTEGER ? ` and at most ${max}` : ''}.`,
    );
  return n;
}

function conditions(xml: Group, within: string): Omit<LifecycleFilter, 'form'> {
  const prefix = xmlText(xml.Prefix, 'Prefix') ?? '';
  if (Buffer.byteLength(prefix) > MAX_PREFIX_BYTES) throw new S3Error('InvalidArgument', `The ${within} prefix is longer than ${MAX_PREFIX_BYTES} bytes.`);
  const tags = ((xml.Tag ?? []) as Element[]).map((raw) => {
    const t = xmlGroup(raw, 'Tag')!;
    const key = xmlText(t.Key, 'Key');
    const value = xmlText(t.Value, 'Value') ?? '';
    if (!key) throw malformedXml('every Tag needs a Key.');
    if (key.length > 128 || value.length > 256) throw new S3Error('InvalidArgument', 'A tag key is at most 128 characters, a value at most 256.');
    return { key, value };
  });
  if (new Set(tags.map((t) => t.key)).size !== tags.length) throw new S3Error('InvalidArgument', 'Duplicate Tag Keys are not allowed.');
  const filter: Omit<LifecycleFilter, 'form'> = { prefix, tags };
  if (xml.ObjectSizeGreaterThan !== undefined) filter.sizeGreaterThan = wholeNumber(xml.ObjectSizeGreaterThan, 'ObjectSizeGreaterThan', 0);
  if (xml.ObjectSizeLessThan !== undefined) filter.sizeLessThan = wholeNumber(xml.ObjectSizeLessThan, 'ObjectSizeLessThan', 1);
  if (filter.sizeGreaterThan !== undefined && filter.sizeLessThan !== undefined && filter.sizeGreaterThan >= filter.sizeLessThan) {
    throw new S3Error('InvalidArgument', 'ObjectSizeGreaterThan must be less than ObjectSizeLessThan.');
  }
  return filter;
}

function ruleFilter(rule: Group): LifecycleFilter {
  const legacyPrefix = xmlText(rule.Prefix, 'Prefix');
  const f = xmlGroup(rule.Filter, 'Filter');
  if (legacyPrefix !== undefined && f !== undefined) throw malformedXml('a rule has either a Prefix or a Filter, not both.');
  if (f === undefined) {
    if (legacyPrefix === undefined) throw malformedXml('a rule needs a Filter (or a Prefix).');
    return { form: 'prefix', ...conditions({ Prefix: legacyPrefix }, 'rule') };
  }
  const named = (['Prefix', 'Tag', 'ObjectSizeGreaterThan', 'ObjectSizeLessThan', 'And'] as const).filter((e) => f[e] !== undefined);
  if (named.length > 1 || ((f.Tag as Element[] | undefined)?.length ?? 0) > 1) throw malformedXml('a Filter holds one condition; combine several with And.');
  if (f.And === undefined) return { form: 'filter', ...conditions(f, 'filter') };
  return { form: 'and', ...conditions(xmlGroup(f.And, 'And')!, 'And') };
}

function parseRule(raw: Element): LifecycleRule {
  const rule = xmlGroup(raw, 'Rule')!;
  const id = xmlText(rule.ID, 'ID') ?? randomUUID();
  if (id.length > MAX_ID_LENGTH) throw new S3Error('InvalidArgument', `ID length should not exceed allowed limit of ${MAX_ID_LENGTH}`);
  const status = xmlText(rule.Status, 'Status');
  if (status !== 'Enabled' && status !== 'Disabled') throw malformedXml('Status must be Enabled or Disabled.');
  const filter = ruleFilter(rule);
  if (rule.Transition !== undefined || rule.NoncurrentVersionTransition !== undefined) {
    // A transition S3 refuses as malformed (a bad Date or Days) gets that 400 before the 501 of what it asks for.
    for (const raw of [rule.Transition ?? []].flat()) {
      const t = xmlGroup(raw, 'Transition');
      if (t?.Date !== undefined) midnightUtc(xmlText(t.Date, 'Date')!);
      if (t?.Days !== undefined) wholeNumber(t.Days, 'Days', 0);
    }
    throw new S3Error('NotImplemented', 'Strata has one storage class: lifecycle transitions are not supported.');
  }
  const parsed: LifecycleRule = { id, enabled: status === 'Enabled', filter };
  const e = xmlGroup(rule.Expiration, 'Expiration');
  if (e) {
    const given = [e.Days, e.Date, e.ExpiredObjectDeleteMarker].filter((v) => v !== undefined).length;
    if (given !== 1) throw malformedXml('Expiration has exactly one of Days, Date or ExpiredObjectDeleteMarker.');
    if (e.Days !== undefined) parsed.expiration = { days: wholeNumber(e.Days, 'Days', 1) };
    else if (e.Date !== undefined) parsed.expiration = { date: midnightUtc(xmlText(e.Date, 'Date')!) };
    else {
      const marker = xmlText(e.ExpiredObjectDeleteMarker, 'ExpiredObjectDeleteMarker');
      if (marker !== 'true' && marker !== 'false') throw malformedXml('ExpiredObjectDeleteMarker must be true or false.');
      if (filter.tags.length > 0) throw new S3Error('InvalidArgument', 'ExpiredObjectDeleteMarker cannot be specified with object tags.');
      parsed.expiration = { expiredObjectDeleteMarker: marker === 'true' };
    }
  }
  const a = xmlGroup(rule.AbortIncompleteMultipartUpload, 'AbortIncompleteMultipartUpload');
  if (a) {
    if (filter.tags.length > 0) throw new S3Error('InvalidArgument', 'AbortIncompleteMultipartUpload cannot be specified with object tags.');
    parsed.abortIncompleteMultipartUploadDays = wholeNumber(a.DaysAfterInitiation, 'DaysAfterInitiation', 1);
  }
  const n = xmlGroup(rule.NoncurrentVersionExpiration, 'NoncurrentVersionExpiration');
  if (n) {
    parsed.noncurrentVersionExpiration = { noncurrentDays: wholeNumber(n.NoncurrentDays, 'NoncurrentDays', 1) };
    if (n.NewerNoncurrentVersions !== undefined)
      parsed.noncurrentVersionExpiration.newerNoncurrentVersions = wholeNumber(n.NewerNoncurrentVersions, 'NewerNoncurrentVersions', 1, 100);
  }
  if (!parsed.expiration && parsed.abortIncompleteMultipartUploadDays === undefined && !parsed.noncurrentVersionExpiration) {
    throw new S3Error('InvalidRequest', 'At least one action needs to be specified in a rule.');
  }
  return parsed;
}

/** An ISO 8601 date or time that falls on midnight UTC, normalised; InvalidArgument otherwise. */
function midnightUtc(raw: string): string {
  // A date alone, or a time without a zone, is read as UTC (S3's dates are GMT).
  const t = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(raw) ? `${raw}T00:00:00Z` : /T[\d:.]+$/.test(raw) ? `${raw}Z` : raw);
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(t)) throw new S3Error('InvalidArgument', "'Date' must be an ISO 8601 date.");
  if (t % 86_400_000 !== 0) throw new S3Error('InvalidArgument', "'Date' must be at midnight GMT.");
  return new Date(t).toISOString();
}

/** The rules of a LifecycleConfiguration document (already parsed from XML), checked as S3 checks them. */
export function parseLifecycleConfiguration(doc: LifecycleConfigurationXml): LifecycleRule[] {
  const rules = (doc.Rule ?? []) as Element[];
  if (rules.length === 0) throw malformedXml('a lifecycle configuration has at least one Rule.');
  if (rules.length > MAX_LIFECYCLE_RULES) throw new S3Error('InvalidRequest', `A lifecycle configuration has at most ${MAX_LIFECYCLE_RULES} rules.`);
  const parsed = rules.map(parseRule);
  if (new Set(parsed.map((r) => r.id)).size !== parsed.length)
    throw new S3Error('InvalidArgument', 'Rule ID must be unique. Found same ID for more than one rule');
  return parsed;
}

function renderConditions(f: LifecycleFilter): Record<string, unknown> {
  return {
    Prefix: f.prefix === '' && f.form === 'and' ? undefined : f.prefix,
    Tag: f.tags.length > 0 ? f.tags.map((t) => ({ Key: t.key, Value: t.value })) : undefined,
    ObjectSizeGreaterThan: f.sizeGreaterThan,
    ObjectSizeLessThan: f.sizeLessThan,
  };
}

function renderFilter(f: LifecycleFilter): Record<string, unknown> {
  if (f.form === 'prefix') return { Prefix: f.prefix };
  if (f.form === 'and') return { Filter: { And: renderConditions(f) } };
  // One condition: the one that was given (an empty Filter reads back as an empty Prefix).
  const one = renderConditions(f);
  if (f.tags.length > 0 || f.sizeGreaterThan !== undefined || f.sizeLessThan !== undefined) delete one.Prefix;
  return { Filter: one };
}

/** The LifecycleConfiguration document's body for a list of rules (in S3's element order). */
export function renderLifecycleConfiguration(rules: readonly LifecycleRule[]): Record<string, unknown> {
  return {
    Rule: rules.map((r) => {
      const exp = r.expiration;
      return {
        ID: r.id,
        ...renderFilter(r.filter),
        Status: r.enabled ? 'Enabled' : 'Disabled',
        Expiration: !exp
          ? undefined
          : 'days' in exp
            ? { Days: exp.days }
            : 'date' in exp
              ? { Date: exp.date }
              : { ExpiredObjectDeleteMarker: exp.expiredObjectDeleteMarker },
        NoncurrentVersionExpiration: r.noncurrentVersionExpiration && {
          NoncurrentDays: r.noncurrentVersionExpiration.noncurrentDays,
          NewerNoncurrentVersions: r.noncurrentVersionExpiration.newerNoncurrentVersions,
        },
        AbortIncompleteMultipartUpload:
          r.abortIncompleteMultipartUploadDays === undefined ? undefined : { DaysAfterInitiation: r.abortIncompleteMultipartUploadDays },
      };
    }),
  };
}
