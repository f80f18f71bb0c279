import type http from 'node:http';
import type { GatewayDeps } from '../deps.js';

/** One S3 request after routing: bucket and key decoded, subresources parsed. */
export interface S3Request {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  bucket: string;
  key: string;
  query: URLSearchParams;
  deps: GatewayDeps;
}

export type S3Handler = (s3: S3Request) => Promise<void>;
