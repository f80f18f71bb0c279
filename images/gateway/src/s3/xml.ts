import { XMLBuilder, XMLParser, XMLValidator } from 'fast-xml-parser';
import { S3Error } from '../../../object-model/src/index.js';

export const S3_NS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: false, processEntities: true });

/** C0 control characters: XML 1.0 cannot carry most of them raw, and a parser turns a raw CR into LF. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0001-\u001f]/g;

/**
 * Render one S3 XML document; `undefined` fields are left out, arrays repeat the element. Control
 * characters in text (keys may hold them) are written as character references (`&#xA;`), as S3 writes
 * them; the markup itself holds none.
 */
export function renderXml(root: string, body: Record<string, unknown>, withNamespace = true): string {
  const content = withNamespace ? { '@_xmlns': S3_NS, ...prune(body) } : prune(body);
  const xml = builder.build({ [root]: content }) as string;
  return DECLARATION + xml.replace(CONTROL_CHARACTERS, (c) => `&#x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')};`);
}

function prune(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) out[k] = v.map((e) => (e && typeof e === 'object' ? prune(e as Record<string, unknown>) : e));
    else if (v && typeof v === 'object') out[k] = prune(v as Record<string, unknown>);
    else out[k] = v;
  }
  return out;
}

/** Elements that may repeat in a request document: always parsed as lists. */
const REPEATED = new Set([
  'Part',
  'Object',
  'Rule',
  'Tag',
  'Transition',
  'NoncurrentVersionTransition',
  'CORSRule',
  'AllowedOrigin',
  'AllowedMethod',
  'AllowedHeader',
  'ExposeHeader',
  'Grant',
]);

/**
 * The one parser of every request document. Text is kept byte for byte, as S3 keeps it: a key or tag of
 * `" "`, `"sp "` or `" lead"` is that key or tag (trimming made DeleteObjects report such keys deleted and
 * delete others or none). Character references (`&#x0A;`, which the AWS SDKs write for a newline in a key)
 * are decoded; `htmlEntities` also knows HTML's named ones, which XML does not: those are refused before parsing.
 */
const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false,
  trimValues: false,
  removeNSPrefix: true,
  processEntities: true,
  htmlEntities: true,
  isArray: (name) => REPEATED.has(name),
});

/** An `&` that starts no XML entity or character reference. */
const NOT_XML_REFERENCE = /&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);)/;

/** A character reference to a code point XML does not allow (XML 1.0 `Char`). */
function refersToNonCharacter(text: string): boolean {
  for (const m of text.matchAll(/&#(x[0-9a-fA-F]+|[0-9]+);/g)) {
    const code = m[1]!.startsWith('x') ? parseInt(m[1]!.slice(1), 16) : parseInt(m[1]!, 10);
    const allowed =
      code === 0x9 ||
      code === 0xa ||
      code === 0xd ||
      (code >= 0x20 && code <= 0xd7ff) ||
      (code >= 0xe000 && code <= 0xfffd) ||
      (code >= 0x10000 && code <= 0x10ffff);
    if (!allowed) return true;
  }
  return false;
}

/**
 * Drop the whitespace between elements (indentation: the text of an element that holds elements, which
 * no S3 document gives a meaning); text elements keep theirs.
 */
function withoutIndentation(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutIndentation);
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '#text' && typeof v === 'string' && v.trim() === '') continue;
    out[k] = withoutIndentation(v);
  }
  return out;
}

/** Whether a parsed node is an element with neither elements nor text in it but whitespace. */
function blank(v: unknown): boolean {
  return typeof v === 'string' && v.trim() === '';
}

/** Parse a request XML document; anything not well-formed, or without the expected root, is MalformedXML. */
export function parseXml<T>(text: string, root: string): T {
  if (!text.trim()) throw new S3Error('MalformedXML');
  if (XMLValidator.validate(text) !== true) throw new S3Error('MalformedXML');
  // S3 request documents never carry a DTD: refusing one keeps entity tricks (external entities,
  // exponential expansion) out of the parser altogether.
  if (/<!DOCTYPE/i.test(text)) throw new S3Error('MalformedXML', 'Document type declarations are not allowed.');
  const markup = text.replace(/<!\[CDATA\[[\s\S]*?\]\]>|<!--[\s\S]*?-->/g, '');
  if (NOT_XML_REFERENCE.test(markup) || refersToNonCharacter(markup))
    throw malformedXml('an & starts no XML entity, or a character reference names no XML character.');
  let doc: Record<string, unknown>;
  try {
    doc = withoutIndentation(parser.parse(text)) as Record<string, unknown>;
  } catch {
    throw new S3Error('MalformedXML');
  }
  const body = doc[root];
  if (body === undefined)
    throw new S3Error('MalformedXML', `The XML you provided was not well-formed or did not validate against our published schema (expected <${root}>).`);
  return (blank(body) ? {} : body) as T;
}

/** The S3 error document. */
export function errorXml(err: S3Error, resource: string, requestId: string): string {
  return renderXml('Error', { Code: err.code, Message: err.message, ...err.extra, Resource: resource, RequestId: requestId }, false);
}

/** MalformedXML saying what in a request document is wrong. */
export function malformedXml(why: string): S3Error {
  return new S3Error('MalformedXML', `The XML you provided was not well-formed or did not validate against our published schema: ${why}`);
}

/** An element of a parsed request document that holds text, once (undefined when absent). */
export function xmlText(v: unknown, element: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw malformedXml(`${element} must appear once, as text.`);
  return v;
}

/** An element of a parsed request document that holds other elements, once (an empty one reads as no elements). */
export function xmlGroup(v: unknown, element: string): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  if (blank(v)) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw malformedXml(`${element} must appear once and hold elements.`);
  return v as Record<string, unknown>;
}
