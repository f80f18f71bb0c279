import type { Readable } from 'node:stream';

/** A body read whole (the caller bounds its size); an HTTP answer that ends before its length (`complete` false) is an error. */
export function readWhole(body: Readable): Promise<Buffer> {
  const cut = () => (body as { complete?: boolean }).complete === false;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (c: Buffer) => chunks.push(c));
    body.once('end', () =>
      cut() ? reject(new Error('the data plane closed the body early')) : resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)),
    );
    body.once('error', reject);
    body.once('close', () => {
      if (cut()) reject(new Error('the data plane closed the body early'));
    });
  });
}
