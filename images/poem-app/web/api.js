// The poem app's JSON API, seen from the page. Every failure becomes an ApiError with a readable message.

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

async function request(path, { method = 'GET', body } = {}) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
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
    throw new ApiError(message, response.status, payload?.error?.code ?? 'http_error');
  }
  return payload;
}

/** @returns {Promise<Array<{code: string, label: string, description: string}>>} */
export async function fetchPoemTypes() {
  return (await request('/api/poem-types')).types;
}

/** @returns {Promise<string>} the poem text */
export async function generatePoem(typeCode, theme) {
  return (await request('/api/generate-poem', { method: 'POST', body: { type: typeCode, theme } })).poem;
}

export async function savePoem(typeLabel, theme, content) {
  return request('/api/poems', { method: 'POST', body: { type: typeLabel, theme, content } });
}

export async function fetchPoems() {
  return (await request('/api/poems')).poems;
}
