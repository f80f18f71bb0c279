// s3rver: a small S3 API server for the bucket-source tests (ListObjectsV2 with ETags, GET, PUT,
// DELETE; it checks access keys, not signatures — SigV4 signing is compared with the AWS SDK signer
// in clip.test.ts). Objects live in a temp directory removed on close.
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { eventually } from '../../support/eventually.js';
import { tempDir, TEST_API_KEY } from './fixtures.js';

type S3rverServer = { run(): Promise<{ port: number }>; close(): Promise<void> };
const S3rver = createRequire(import.meta.url)('s3rver') as new (options: Record<string, unknown>) => S3rverServer;

export interface TestS3 {
  endpoint: string;
  put(bucket: string, key: string, body: Buffer | string): Promise<void>;
  remove(bucket: string, key: string): Promise<void>;
  close(): Promise<void>;
}

/** An S3 server on a free port with these buckets; access key and secret are both S3RVER. */
export async function startS3rver(buckets: string[]): Promise<TestS3> {
  const storage = tempDir('s3rver-images');
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: storage, configureBuckets: buckets.map((name) => ({ name })) });
  const endpoint = `http://127.0.0.1:${(await server.run()).port}`;
  return {
    endpoint,
    async put(bucket, key, body) {
      const response = await fetch(`${endpoint}/${bucket}/${key}`, { method: 'PUT', body: typeof body === 'string' ? body : new Uint8Array(body) });
      expect(response.status, key).to.equal(200);
    },
    async remove(bucket, key) {
      expect((await fetch(`${endpoint}/${bucket}/${key}`, { method: 'DELETE' })).status, key).to.equal(204);
    },
    async close() {
      await server.close();
      rmSync(storage, { recursive: true, force: true });
    },
  };
}

/** Who s3rver says owns every bucket (ListBuckets' Owner ID): the owner image search records. */
export const S3RVER_OWNER = '123456789000';

/** The environment of an image search that follows s3://<bucket>/<prefix> on this server, with TEST_API_KEY as its admin key. */
export function bucketSourceEnv(s3: TestS3, url: string, dirs: { modelDir: string; imageDir: string; indexDir: string }, syncSeconds = 0): NodeJS.ProcessEnv {
  return {
    PORT: '0',
    IMAGE_FILE_DIR: dirs.imageDir,
    IMAGE_SEARCH_MODEL_DIR: dirs.modelDir,
    IMAGE_SEARCH_INDEX_DIR: dirs.indexDir,
    IMAGE_SEARCH_SOURCE_S3_URL: url,
    IMAGE_SEARCH_SOURCE_SYNC_SECONDS: String(syncSeconds),
    IMAGE_SEARCH_S3_ENDPOINT: s3.endpoint,
    IMAGE_SEARCH_S3_ACCESS_KEY_ID: 'S3RVER',
    IMAGE_SEARCH_S3_SECRET_ACCESS_KEY: 'S3RVER',
    IMAGE_SEARCH_API_KEY: TEST_API_KEY,
  };
}

/** Polls `probe` until it returns a value (undefined: not yet); bounded by the test's own timeout as before. */
export function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  return eventually(async () => (await probe()) ?? false, 'the probe to answer', 60_000) as Promise<T>;
}
