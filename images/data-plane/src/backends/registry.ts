import { S3Error } from '../../../service-kit/src/index.js';
import { FsBackend } from './fs-backend.js';
import type { StorageBackend } from './storage-backend.js';

/** Picks the storage backend for a bucket's backend config, and finds one again by its key (for freeing). */
export class BackendRegistry {
  private readonly byKey = new Map<string, StorageBackend>();

  constructor(readonly fs: FsBackend) {
    this.byKey.set(fs.key, fs);
  }

  forBucket(config: { kind: string }): StorageBackend {
    if (config.kind === 'fs') return this.fs;
    throw new S3Error('NotImplemented', `the ${JSON.stringify(config.kind)} storage backend is not available in this data plane`);
  }

  byBackendKey(key: string): StorageBackend | undefined {
    return this.byKey.get(key);
  }
}
