import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { expect } from 'chai';
import { FsBackend } from '../../images/data-plane/src/backends/fs-backend.js';
import type { StoredObject } from '../../images/data-plane/src/catalog/catalog.js';
import { dataPlaneMetrics } from '../../images/data-plane/src/metrics.js';
import { ObjectService } from '../../images/data-plane/src/uploads/object-service.js';
import { createLogger, Registry } from '../../images/service-kit/src/index.js';
import { freshDirPerTest } from '../support/temp-dir.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/**
 * ObjectService.read on the filesystem backend: the stream it answers is the reader's to pull (it counts
 * the bytes it hands out without making the stream flow). Only the read is exercised, so the service
 * gets no catalog, collector or commit listener (read uses none of them).
 */
describe('data plane: object reads leave the reader in charge', () => {
  const tmp = freshDirPerTest('strata-object-read-');
  const unused = undefined as never;

  async function stored(size: number) {
    const backend = new FsBackend(tmp.path);
    const data = randomBytes(size);
    const source = path.join(tmp.path, 'source.bin');
    await writeFile(source, data);
    const { createReadStream } = await import('node:fs');
    const blob = await backend.put(createReadStream(source), { expectedSize: size });
    const object = { bucket: 'b', key: 'k', size, locator: blob.locator, blobId: 1, backendKey: backend.key, owner: 'alice' } as StoredObject;
    const metrics = dataPlaneMetrics(new Registry());
    const service = new ObjectService(unused, unused, unused, unused, metrics, createLogger('test', 'silent'), () => new Date());
    const bytesOut = async () => (await metrics.bytesOut.get()).values[0]?.value ?? 0;
    return { backend, data, object, service, bytesOut };
  }

  async function bytesOf(stream: Readable): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  it('a slow reader of a large object does not make the server read (and buffer) the object ahead of it', async () => {
    const size = 16 * 1024 * 1024;
    const { data, object, service, backend, bytesOut } = await stored(size);
    const stream = await service.read(object, backend);
    expect(stream.readableFlowing, 'the stream flows before anyone reads it').to.not.equal(true);
    await once(stream, 'readable');
    const first = stream.read() as Buffer;
    // Many event-loop turns with file I/O: a stream that flowed on its own would read the object meanwhile.
    const tick = path.join(tmp.path, 'tick.bin');
    await writeFile(tick, 'x');
    for (let i = 0; i < 50; i++) await readFile(tick);
    expect(stream.readableFlowing).to.not.equal(true);
    // What the stream buffers: a few of the backend's 1 MiB read chunks, not the object.
    expect(await bytesOut(), 'bytes read ahead of the reader').to.be.at.most(size / 4);
    const rest = await bytesOf(stream);
    expect(md5(Buffer.concat([first, rest]))).to.equal(md5(data));
    expect(await bytesOut()).to.equal(size);
  });

  it('counts the bytes of a small object (read whole at once) and of a range of a large one', async () => {
    const { data, object, service, backend, bytesOut } = await stored(4096);
    expect(md5(await bytesOf(await service.read(object, backend)))).to.equal(md5(data));
    expect(await bytesOut()).to.equal(4096);
    const large = await stored(4 * 1024 * 1024);
    const range = { start: 1000, end: 3 * 1024 * 1024 };
    expect(md5(await bytesOf(await large.service.read(large.object, large.backend, range)))).to.equal(md5(large.data.subarray(1000, range.end + 1)));
    expect(await large.bytesOut()).to.equal(range.end - range.start + 1);
  });
});
