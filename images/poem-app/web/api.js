// The poem app's JSON API, seen from the page. Every failure becomes an ApiError with a readable message.

export class ApiError extends Error {
  constructor(message, status, code, hint) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    /** What the person can do about it, when the server says. */
    this.hint = hint;
  }
}

const ACCESS_KEY = 'strata-poet-access-key';

/** The history access key (POEM_APP_API_KEY) for this tab, if the person entered one. */
export function accessKey() {
  return sessionStorage.getItem(ACCESS_KEY) ?? '';
}

export function setAccessKey(key) {
  if (key) sessionStorage.setItem(ACCESS_KEY, key);
  else sessionStorage.removeItem(ACCESS_KEY);
}

async function request(path, { method = 'GET', body, write = false } = {}) {
  let response;
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (write && accessKey()) headers.authorization = `Bearer ${accessKey()}`;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError('Cannot reach the Strata Poet server. Check your connection and try again.', 0, 'network');
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    // Not JSON (e.g. a proxy's error page): fall through to the status-based message.
  }
  if (!response.ok) {
    const message = payload?.error?.message ?? `The server answered ${response.status} ${response.statusText}.`;
    throw new ApiError(message, response.status, payload?.error?.code ?? 'http_error', payload?.error?.hint);
  }
  return payload;
}

/** @returns {Promise<Array<{code: string, label: string, description: string}>>} */
export async function fetchPoemTypes() {
  return (await request('/api/poem-types')).types;
}

/** @returns {Promise<{poem: string, model: string}>} the poem text and the model that wrote it */
export async function generatePoem(typeCode, theme) {
  const { poem, model } = await request('/api/generate-poem', { method: 'POST', body: { type: typeCode, theme } });
  return { poem, model };
}

/** @returns {Promise<{model: string, origin: string, historyWrites: 'open' | 'key' | 'disabled'}>} */
export async function fetchInfo() {
  return request('/api/info');
}

export async function savePoem(typeLabel, theme, content, model) {
  return request('/api/poems', { method: 'POST', body: { type: typeLabel, theme, content, model: model ?? null }, write: true });
}

export async function deletePoem(id) {
  await request(`/api/poems/${encodeURIComponent(id)}`, { method: 'DELETE', write: true });
}

export async function fetchPoems() {
  return (await request('/api/poems')).poems;
}
