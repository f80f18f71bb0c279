import type http from 'node:http';
import type { Next } from '../../../service-kit/src/index.js';
import type { S3Error } from '../../../object-model/src/index.js';

/** How a flow-control rejection reaches the client. The gateway may pass `(err, _req, _res, next) => next(err)`. */
export type RenderRejection = (err: S3Error, req: http.IncomingMessage, res: http.ServerResponse, next: Next) => void;

const escapeXml = (s: string) => s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** The path of a request target (without its query). */
const pathOf = (url = '/') => url.split('?', 1)[0]!;

/** Minimal S3 error document (what S3 clients parse to back off); HEAD gets the status only. */
export const renderS3ErrorXml: RenderRejection = (err, req, res) => {
  res.statusCode = err.status;
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const body =
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${err.code}</Code><Message>${escapeXml(err.message)}</Message>` +
    `<Resource>${escapeXml(pathOf(req.url))}</Resource></Error>`;
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
};
