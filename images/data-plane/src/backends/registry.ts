import { type Logger, type SecretBox } from '../../../service-kit/src/index.js';
import { FS_BACKEND_OFF, S3Error } from '../../../object-model/src/index.js';
import { BACKEND_KINDS, S3_BACKEND_KINDS, settingsOfBucket, type BackendsConfig, type S3BackendKind } from './config.js';
import { FsBackend } from './fs-backend.js';
import { S3Backend, type S3BackendSettings } from './s3-backend.js';
import type { StorageBackend } from './storage-backend.js';

/** A bucket's backend config as stored with the bucket (and with each blob). */
export interface BucketBackendConfig {
  kind: string;
  [setting: string]: unknown;
}

/**
 * Picks the storage backend for a bucket's backend config, and finds one again by its key (for
 * reading and freeing blobs). `fs` is the data dir; `minio` and `cloud` use the bucket's own settings
 * when it carries an endpoint (operator-made buckets), else the server's configured backend of that kind.
 */
export class BackendRegistry {
  private readonly byKey = new Map<string, FsBackend | S3Backend>();
  /**
   * Every backend in use, fs first; it grows as buckets bring their own backends. The cleanup job
   * holds this very array, so backends registered later are swept too.
   */
  readonly sweepable: Array<FsBackend | S3Backend> = [];
  private readonly configured: Partial<Record<S3BackendKind, S3Backend>> = {};

  constructor(
    readonly fs: FsBackend,
    config: BackendsConfig = {},
    private readonly logger?: Logger,
    /** Opens the sealed secret keys of buckets that bring their own backend (operator-made). */
    private readonly secrets?: SecretBox,
    /** False: fs buckets are refused (this data plane's data dir is scratch space, not the shared volume). */
    private readonly fsEnabled = true,
  ) {
    this.register(fs);
    for (const kind of S3_BACKEND_KINDS) {
      const settings = config[kind];
      if (settings) this.configured[kind] = this.register(this.s3({ ...settings, kind }));
    }
  }

  private s3(settings: S3BackendSettings): S3Backend {
    return new S3Backend(settings, (err) => this.logger?.warn({ err, backend: S3Backend.keyOf(settings) }, 'backend sweep failed; will retry'));
  }

  private register<T extends FsBackend | S3Backend>(backend: T): T {
    const known = this.byKey.get(backend.key);
    if (known) return known as T;
    this.byKey.set(backend.key, backend);
    this.sweepable.push(backend);
    return backend;
  }

  forBucket(config: BucketBackendConfig): StorageBackend {
    if (config.kind === 'fs') {
      if (!this.fsEnabled) throw new S3Error('InvalidArgument', FS_BACKEND_OFF, { ArgumentName: 'x-strata-backend' });
      return this.fs;
    }
    if (!BACKEND_KINDS.has(config.kind))
      throw new S3Error('InvalidArgument', `Unknown storage backend ${JSON.stringify(config.kind)}: use fs, minio or cloud.`);
    const kind = config.kind as S3BackendKind;
    const own = settingsOfBucket(config, this.secrets);
    if (own) return this.byKey.get(S3Backend.keyOf(own)) ?? this.register(this.s3(own));
    const backend = this.configured[kind];
    if (!backend) {
      throw new S3Error('InvalidArgument', `The ${kind} storage backend is not configured on this server (STRATA_BACKEND_${kind.toUpperCase()}_ENDPOINT).`, {
        ArgumentName: 'x-strata-backend',
      });
    }
    return backend;
  }

  /**
   * The backend a new bucket would use, once it answers (S3 ServiceUnavailable otherwise). A bucket's
   * own backend is registered only after that, so failed checks leave nothing behind to sweep.
   */
  async check(config: BucketBackendConfig): Promise<StorageBackend> {
    const own = BACKEND_KINDS.has(config.kind) && config.kind !== 'fs' ? settingsOfBucket(config, this.secrets) : undefined;
    if (!own) {
      const backend = this.forBucket(config);
      await backend.ready?.();
      return backend;
    }
    const known = this.byKey.get(S3Backend.keyOf(own)) as S3Backend | undefined;
    const backend = known ?? this.s3(own);
    await backend.ready?.();
    return known ?? this.register(backend);
  }

  byBackendKey(key: string): StorageBackend | undefined {
    return this.byKey.get(key);
  }

  /** The backend a stored blob lives on: by its key, else rebuilt from the config stored with it. */
  forBlob(key: string, config: BucketBackendConfig | undefined): StorageBackend | undefined {
    const known = this.byKey.get(key);
    if (known || !config) return known;
    try {
      const backend = this.forBucket(config);
      return backend.key === key ? backend : undefined;
    } catch {
      return undefined;
    }
  }
}
