import type { NextFunction, Request, Response } from 'express';
import type { S3Error } from '../../../object-model/src/index.js';

/** How a flow-control rejection reaches the client. The gateway may pass `(err, _req, _res, next) => next(err)`. */
export type RenderRejection = (err: S3Error, req: Request, res: Response, next: NextFunction) => void;

const escapeXml = (s: string) => s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** Minimal S3 error document (what S3 clients parse to back off); HEAD gets the status only. */
export const renderS3ErrorXml: RenderRejection = (err, req, res) => {
  res.status(err.status);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const body =
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${err.code}</Code><Message>${escapeXml(err.message)}</Message>` +
    `<Resource>${escapeXml(req.path)}</Resource></Error>`;
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
};
