// Multipart form parsing for image queries (busboy), with a size limit answered by 413.
import busboy from 'busboy';
import type { Request } from 'express';
import { InputError } from '../search-service.js';

export interface SearchForm {
  fields: Record<string, string>;
  image?: { name: string; data: Buffer };
}

export function parseSearchForm(req: Request, maxBytes: number, fileField = 'query_img'): Promise<SearchForm> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { fileSize: maxBytes, files: 1, fields: 20, fieldSize: 64 * 1024 } });
    } catch (err) {
      reject(new InputError(`bad multipart request: ${err instanceof Error ? err.message : String(err)}`));
      return;
    }
    const form: SearchForm = { fields: {} };
    let failure: Error | undefined;
    parser.on('field', (name, value) => (form.fields[name] = value));
    parser.on('file', (name, stream, info) => {
      if (name !== fileField) {
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => {
        failure = new InputError(`upload larger than ${maxBytes} bytes`, 413);
        stream.resume();
      });
      stream.on('end', () => {
        if (!failure) form.image = { name: info.filename ?? 'upload', data: Buffer.concat(chunks) };
      });
    });
    parser.on('error', (err: Error) => reject(new InputError(`bad multipart request: ${err.message}`)));
    parser.on('close', () => (failure ? reject(failure) : resolve(form)));
    req.pipe(parser);
  });
}
