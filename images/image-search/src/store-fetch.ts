// Requests to the object store (the bucket source, the model download) with a limit on silence.

/** Silence from the object store, ms, after which a request is given up (its headers, or the next bytes of its body). */
export const DEFAULT_STORE_IDLE_MS = 30_000;

/**
 * fetch, given up (rejected, or its body stream failing) when the answer's headers, or the next bytes of
 * its body, take longer than `idleMs`, or when `stop` aborts: an object store that accepts and then
 * hangs holds a sync round (and a shutdown waiting for it) for at most that long per request, not
 * for the fetch defaults (5 min for the headers, then 5 min per chunk of body).
 */
export async function fetchFromStore(url: URL, headers: Record<string, string>, idleMs = DEFAULT_STORE_IDLE_MS, stop?: AbortSignal): Promise<Response> {
  const controller = new AbortController();
  const onStop = () => controller.abort(stop?.reason);
  if (stop?.aborted) onStop();
  stop?.addEventListener('abort', onStop, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      done();
      controller.abort(new Error(`the object store sent nothing for ${idleMs} ms (GET ${url.pathname})`));
    }, idleMs);
    timer.unref();
  };
  const done = () => {
    clearTimeout(timer);
    stop?.removeEventListener('abort', onStop);
  };
  arm();
  let response: Response;
  try {
    response = await fetch(url, { headers, signal: controller.signal });
  } catch (err) {
    done();
    throw err;
  }
  if (!response.body) {
    done();
    return response;
  }
  arm();
  // Every chunk re-arms the timer; the end of the body (or its failure) ends the watch.
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        arm();
        out.enqueue(chunk);
      },
      flush: done,
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
