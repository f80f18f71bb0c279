import { isLoopback } from '../../service-kit/src/index.js';

/**
 * The key this platform's own clients of its model server send (the poem app's upstream, image
 * search's LLM) when MODEL_SERVER_API_KEYS makes the model server ask for one: its first key, for an
 * upstream URL that is that model server (same port, the same or a loopback host). Undefined when no
 * key is needed or the upstream is another server (whose key is the user's to give).
 */
export function localModelServerKey(env: NodeJS.ProcessEnv, upstream: string | undefined, modelServerUrl: string | undefined): string | undefined {
  const key = (env.MODEL_SERVER_API_KEYS ?? '')
    .split(',')
    .map((k) => k.trim())
    .find(Boolean);
  if (!key || !upstream || !modelServerUrl) return undefined;
  let to: URL;
  let local: URL;
  try {
    to = new URL(upstream);
    local = new URL(modelServerUrl);
  } catch {
    return undefined;
  }
  const sameHost = to.hostname === local.hostname || (isLoopback(to.hostname) && isLoopback(local.hostname));
  return sameHost && to.port === local.port ? key : undefined;
}
