import type { Response } from 'express';
import type { Caller } from '../context.js';
import { renderXml } from './xml.js';

/** Send an S3 XML document with status 200 (or the given status). */
export function sendXml(res: Response, root: string, body: Record<string, unknown>, status = 200): void {
  const xml = renderXml(root, body);
  res.status(status);
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', Buffer.byteLength(xml));
  res.end(xml);
}

/** Strata's JSON envelope for its own (non-S3) answers. */
export function sendData(res: Response, data: unknown, status = 200): void {
  res.status(status).json({ data });
}

export function quoted(etag: string): string {
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

/** S3 owner element: the ID and display name are the username. */
export function owner(name: string): { ID: string; DisplayName: string } {
  return { ID: name, DisplayName: name };
}

export function callerOwner(caller: Caller): { ID: string; DisplayName: string } {
  return owner(caller.username);
}

/** S3's `encoding-type=url`: like encodeURIComponent but keeping '/' readable. */
export function urlEncodeKey(value: string): string {
  return encodeURIComponent(value).replace(/%2F/g, '/');
}
