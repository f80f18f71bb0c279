import { checkTagSet, type Tag } from '../../../object-model/src/index.js';
import { malformedXml, xmlGroup, xmlText } from './xml.js';

/** S3's `Tagging` document ⇄ a bucket's or an object's tags, checked as S3 checks them. */

export interface TaggingXml {
  TagSet?: unknown;
}

/** The tags of a Tagging document (already parsed from XML); an empty TagSet is no tags. */
export function parseTagging(doc: TaggingXml, of: 'bucket' | 'object'): Tag[] {
  const set = xmlGroup(doc.TagSet, 'TagSet');
  if (!set) throw malformedXml('a Tagging document holds a TagSet.');
  const tags = ((set.Tag ?? []) as unknown[]).map((raw) => {
    const tag = xmlGroup(raw, 'Tag')!;
    const key = xmlText(tag.Key, 'Key');
    if (key === undefined) throw malformedXml('every Tag has a Key.');
    return { key, value: xmlText(tag.Value, 'Value') ?? '' };
  });
  return checkTagSet(tags, of);
}

/** The Tagging document's body for a list of tags. */
export function renderTagging(tags: readonly Tag[]): Record<string, unknown> {
  return { TagSet: { Tag: tags.map((t) => ({ Key: t.key, Value: t.value })) } };
}
