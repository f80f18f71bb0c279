import { MAX_BUCKET_TAGS, S3Error, type BucketTag } from '../../../service-kit/src/index.js';
import { malformedXml, xmlGroup, xmlText } from './xml.js';

/** S3's `Tagging` document ⇄ a bucket's tags, checked as S3 checks them. */

export interface TaggingXml {
  TagSet?: unknown;
}

/** Letters, digits, spaces and + - = . _ : / @ (S3's tag characters). */
const TAG_TEXT = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;

/** The tags of a Tagging document (already parsed from XML); an empty TagSet is no tags. */
export function parseTagging(doc: TaggingXml): BucketTag[] {
  const set = xmlGroup(doc.TagSet, 'TagSet');
  if (!set) throw malformedXml('a Tagging document holds a TagSet.');
  const tags = ((set.Tag ?? []) as unknown[]).map((raw) => {
    const tag = xmlGroup(raw, 'Tag')!;
    const key = xmlText(tag.Key, 'Key');
    const value = xmlText(tag.Value, 'Value') ?? '';
    if (key === undefined) throw malformedXml('every Tag has a Key.');
    if (key.length === 0 || key.length > 128 || value.length > 256) throw new S3Error('InvalidTag', 'A tag key is 1 to 128 characters, a value at most 256.');
    if (!TAG_TEXT.test(key) || !TAG_TEXT.test(value)) throw new S3Error('InvalidTag', 'Tags may contain letters, digits, spaces and + - = . _ : / @ only.');
    if (key.toLowerCase().startsWith('aws:')) throw new S3Error('InvalidTag', 'System tags cannot be added/updated by requester');
    return { key, value };
  });
  if (tags.length > MAX_BUCKET_TAGS) throw new S3Error('InvalidTag', `Bucket tag count cannot be greater than ${MAX_BUCKET_TAGS}`);
  if (new Set(tags.map((t) => t.key)).size !== tags.length) throw new S3Error('InvalidTag', 'Cannot provide multiple Tags with the same key');
  return tags;
}

/** The Tagging document's body for a list of tags. */
export function renderTagging(tags: readonly BucketTag[]): Record<string, unknown> {
  return { TagSet: { Tag: tags.map((t) => ({ Key: t.key, Value: t.value })) } };
}
