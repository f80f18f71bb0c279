import type { Request, Response } from 'express';
import type { GatewayDeps } from '../deps.js';

/** One S3 request after routing: bucket and key decoded, subresources parsed. */
export interface S3Request {
  req: Request;
  res: Response;
  bucket: string;
  key: string;
  query: URLSearchParams;
  deps: GatewayDeps;
}

export type S3Handler = (s3: S3Request) => Promise<void>;
