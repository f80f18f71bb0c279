import type { Logger } from '../../../service-kit/src/index.js';
import type { BackendRegistry } from '../backends/registry.js';
import type { Catalog } from '../catalog/catalog.js';

/**
 * Frees the bytes of blobs that no NORMAL or RECYCLED object references (reference count 0). Each
 * blob is first claimed (state FREEING, only while still at 0), so an instant upload or a copy can
 * never take a new reference to bytes being deleted.
 */
export class BlobCollector {
  constructor(
    private readonly catalog: Catalog,
    private readonly backends: BackendRegistry,
    private readonly logger: Logger,
  ) {}

  /** Free the given blobs if still unreferenced, or every unreferenced blob; answers how many were freed. */
  async collect(blobIds?: number[]): Promise<number> {
    if (blobIds && blobIds.length === 0) return 0;
    const candidates = await this.catalog.unreferencedBlobs(blobIds);
    let freed = 0;
    for (const id of candidates) {
      const claimed = await this.catalog.claimForFreeing(id);
      if (!claimed) continue;
      const backend = this.backends.forBlob(claimed.backendKey, claimed.backend);
      if (!backend) {
        this.logger.warn({ blobId: id, backend: claimed.backendKey }, 'no backend for unreferenced blob; left for later');
        continue;
      }
      try {
        await backend.delete(claimed.locator);
        await this.catalog.forgetBlob(id);
        freed++;
      } catch (err) {
        this.logger.warn({ err, blobId: id }, 'freeing blob bytes failed; will retry');
      }
    }
    return freed;
  }
}
