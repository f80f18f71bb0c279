// Multipart form parsing for image queries (busboy), with a size limit answered by 413.
import busboy from 'busboy';
import type { Request } from 'express';
import { InputError } from '../search-service.js';

export interface SearchForm {
  fields: Record<string, string>;
  image?: { name: string; data: Buffer };
}

const MAX_FIELDS = 20;
const MAX_FIELD_BYTES = 64 * 1024;
/** Bytes a form may carry besides its file: its fields, and the parts' headers and boundaries. */
const FORM_OVERHEAD_BYTES = MAX_FIELDS * MAX_FIELD_BYTES + 64 * 1024;

/**
 * The form of an image query. A body past its bound (a file over `maxBytes`, or more bytes than a form
 * with such a file and its fields can hold, declared or sent) is refused 413 at once, its connection
 * closed after the answer (the kit's lingering close): the rest is not read, and nothing of it is kept.
 */
export function parseSearchForm(req: Request, maxBytes: number, fileField = 'query_img'): Promise<SearchForm> {
  return new Promise((resolve, reject) => {
    const bound = maxBytes + FORM_OVERHEAD_BYTES;
    let settled = false;
    let parser: busboy.Busboy | undefined;
    const refuse = (err: Error) => {
      if (settled) return;
      settled = true;
      if (parser) req.unpipe(parser);
      req.off('data', count);
      // Not kept alive: Node would otherwise read (and drop) the whole rest of the body to reuse it.
      req.res?.setHeader('Connection', 'close');
      reject(err);
    };
    const tooLarge = () => refuse(new InputError(`upload larger than ${maxBytes} bytes`, 413));
    let received = 0;
    const count = (chunk: Buffer) => {
      received += chunk.length;
      if (received > bound) tooLarge();
    };
    if (Number(req.headers['content-length'] ?? 0) > bound) return tooLarge();
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: maxBytes, files: 1, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES } });
    } catch (err) {
      refuse(new InputError(`bad multipart request: ${err instanceof Error ? err.message : String(err)}`));
      return;
    }
    const form: SearchForm = { fields: {} };
    parser.on('field', (name, value) => (form.fields[name] = value));
    parser.on('file', (name, stream, info) => {
      // Any file past the limit (the query's or another) ends the form.
      stream.on('limit', tooLarge);
      if (name !== fileField) {
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (!settled) form.image = { name: info.filename ?? 'upload', data: Buffer.concat(chunks) };
      });
    });
    parser.on('error', (err: Error) => refuse(new InputError(`bad multipart request: ${err.message}`)));
    parser.on('close', () => {
      if (settled) return;
      settled = true;
      req.off('data', count);
      resolve(form);
    });
    req.on('data', count);
    req.pipe(parser);
  });
}
