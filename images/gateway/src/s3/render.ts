import type http from 'node:http';
import { sendJson } from '../../../service-kit/src/index.js';
import type { Caller } from '../context.js';
import { renderXml } from './xml.js';

/** Send an S3 XML document with status 200 (or the given status). */
export function sendXml(res: http.ServerResponse, root: string, body: Record<string, unknown>, status = 200, withNamespace = true): void {
  const xml = renderXml(root, body, withNamespace);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/xml');
  res.setHeader('Content-Length', Buffer.byteLength(xml));
  res.end(xml);
}

/** Strata's JSON envelope for its own (non-S3) answers. */
export function sendData(res: http.ServerResponse, data: unknown, status = 200): void {
  sendJson(res, { data }, status);
}

/** An answer with a status and no body. */
export function sendStatus(res: http.ServerResponse, status: number): void {
  res.statusCode = status;
  res.end();
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
