import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * `stream/promises` pipeline, except that a failure is reported only once every stream has closed.
 *
 * pipeline rejects as soon as one stream fails, while a file stream it destroyed may still be opening its
 * file on the thread pool: a caller that then removes the (temp) file finds nothing, and the file appears
 * just after, left behind for good (seen as a leaked `.tmp` blob under load). Here the streams are
 * destroyed and waited for first, so a file created by a sink is closed and removable when this rejects.
 * Every stream must emit 'close' (Node's streams do, unless built with `emitClose: false`).
 */
export async function pipelineClosed(...streams: [Readable, ...Array<Readable | Writable>]): Promise<void> {
  try {
    await pipeline(streams);
  } catch (err) {
    await Promise.all(streams.map(destroyedAndClosed));
    throw err;
  }
}

function destroyedAndClosed(stream: Readable | Writable): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('close', () => resolve());
    // pipeline destroyed the others already; a stream that had finished cleanly closes this way too.
    stream.destroy();
  });
}
