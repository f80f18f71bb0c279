// Strata image search web UI: plain DOM, no dependencies (works offline).
'use strict';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'strata-image-search-token';

function showMessage(text, isError = false) {
  $('message').textContent = text;
  $('message').className = isError ? 'error' : '';
}

/** The access token for changes to the index: kept for this browser tab only. */
function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (token()) headers.authorization = `Bearer ${token()}`;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  const message = body.error && body.error.message;
  if (response.status === 401 || response.status === 403) {
    throw new Error(`${message || response.statusText} (paste a token into “Access token”)`);
  }
  if (!response.ok) throw new Error(message || `${response.status} ${response.statusText}`);
  return body;
}

function postJson(path, payload, options = {}) {
  return api(path, { ...options, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload ?? {}) });
}

/** What a result is called: `bucket/key` for a bucket image (its path is a hash of the key), else its path. Set as text, never as HTML. */
const labelOf = (r) => (r.source ? `${r.source.bucket}/${r.source.key}` : r.path);

/** Results as buttons: each opens the detail view (keyboard: Tab, then Enter or Space). */
function renderResults(results) {
  const grid = $('results');
  grid.replaceChildren();
  for (const r of results) {
    const card = document.createElement('button');
    card.type = 'button';
    card.className = 'card';
    card.dataset.id = String(r.id);
    card.setAttribute('aria-label', `${labelOf(r)}, distance ${r.distance.toFixed(4)}: open`);
    // The grid shows thumbnails (a few KB; 2x for dense screens), never the original (that is for the detail view).
    const img = document.createElement('img');
    img.src = r.thumbnailUrl || r.url;
    if (r.thumbnailSrcset) img.srcset = r.thumbnailSrcset;
    img.alt = '';
    img.loading = 'lazy';
    img.decoding = 'async';
    const meta = document.createElement('span');
    meta.className = 'meta';
    const distance = document.createElement('span');
    distance.className = 'distance';
    distance.textContent = `distance ${r.distance.toFixed(4)}`;
    const name = document.createElement('span');
    name.className = 'label';
    name.title = labelOf(r);
    name.textContent = `#${r.id} ${labelOf(r)}`;
    meta.append(distance, name);
    card.append(img, meta);
    card.addEventListener('click', () => openDetail(r));
    grid.append(card);
  }
}

let current = null;

/** The box under the search: a weak-match hint (nothing matched well) and the LLM's explanation or note. */
function showExplanation(lines) {
  const text = lines.filter(Boolean).join('\n');
  $('explanation').hidden = !text;
  $('explanation').textContent = text;
}

function openDetail(result) {
  current = result;
  $('detail-title').textContent = labelOf(result);
  $('detail-img').src = result.url;
  $('detail-img').alt = labelOf(result);
  // The stored bytes (TIFF, HEIF as they are): the view above may be a conversion for the browser.
  $('detail-original').href = `${result.url}${result.url.includes('?') ? '&' : '?'}original=true`;
  $('detail-meta').textContent = `id ${result.id} · distance ${result.distance.toFixed(4)}`;
  $('detail').showModal();
}

$('more-like-this').addEventListener('click', async () => {
  const { id, path } = current;
  $('detail').close();
  showMessage('searching…');
  try {
    const body = await postJson('/api/tools/call', { tool: 'search_by_image_id', arguments: { image_id: id, topk: topk() } });
    renderResults(body.result.results);
    showMessage(`${body.result.results.length} images like ${path}`);
  } catch (err) {
    showMessage(err.message, true);
  }
});

$('remove-image').addEventListener('click', async () => {
  const { id, path } = current;
  try {
    await postJson('/api/index/remove', { image_ids: [id] });
    $('detail').close();
    document.querySelector(`#results .card[data-id="${id}"]`)?.remove();
    showMessage(`removed ${path} from the index`);
    await refreshStatus();
  } catch (err) {
    $('detail').close();
    showMessage(err.message, true);
  }
});

function topk() {
  return Number($('topk').value) || 20;
}

$('token').value = token();
$('token').addEventListener('change', () => sessionStorage.setItem(TOKEN_KEY, $('token').value.trim()));

/** The running text search (an AI-assisted one waits for the LLM): "Cancel" aborts it. */
let searching = null;
$('cancel-search').addEventListener('click', () => searching && searching.abort());

$('text-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const query = $('query').value.trim();
  if (!query) return;
  if (searching) searching.abort();
  const controller = new AbortController();
  searching = controller;
  $('cancel-search').hidden = false;
  showMessage('searching…');
  $('explanation').hidden = true;
  const { signal } = controller;
  try {
    if ($('use-ai').checked) {
      const body = await postJson('/api/search/rag', { query, topk: topk(), use_expansion: true }, { signal });
      renderResults(body.results);
      const explained = body.ai_explanation ? `${body.ai_explanation} (queries: ${body.expanded_queries.join(' | ')})` : body.note;
      showExplanation([body.hint, explained]);
      showMessage(`${body.total_results} results`);
    } else {
      const body = await postJson('/search', { query, topk: topk() }, { signal });
      renderResults(body.results);
      showExplanation([body.hint]);
      showMessage(`${body.total_results} results for “${query}”`);
    }
  } catch (err) {
    if (signal.aborted) {
      if (searching === controller) showMessage('search cancelled');
    } else showMessage(err.message, true);
  } finally {
    if (searching === controller) {
      searching = null;
      $('cancel-search').hidden = true;
    }
  }
});

$('image-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const file = $('query-img').files[0];
  if (!file) return showMessage('choose an image first', true);
  const form = new FormData();
  form.append('topk', String(topk()));
  form.append('query_img', file);
  showMessage('searching…');
  try {
    const body = await api('/search', { method: 'POST', body: form });
    renderResults(body.results);
    showMessage(`${body.total_results} images similar to ${file.name}`);
  } catch (err) {
    showMessage(err.message, true);
  }
});

$('add-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const paths = $('add-paths')
    .value.split('\n')
    .map((p) => p.trim())
    .filter(Boolean);
  if (!paths.length) return;
  try {
    const body = await postJson('/api/index/add', { image_paths: paths });
    showMessage(`added ${body.added.length}, skipped ${body.skipped.length}`);
    $('add-paths').value = '';
    await refreshStatus();
  } catch (err) {
    showMessage(err.message, true);
  }
});

for (const op of ['merge', 'rebuild']) {
  $(op).addEventListener('click', async () => {
    try {
      await postJson(`/api/index/${op}`);
      showMessage(`${op} started`);
      await refreshStatus();
    } catch (err) {
      showMessage(err.message, true);
    }
  });
}

function row(list, term, value, className) {
  const dt = document.createElement('dt');
  dt.textContent = term;
  const dd = document.createElement('dd');
  dd.textContent = value;
  if (className) dd.className = className;
  list.append(dt, dd);
}

async function refreshStatus() {
  try {
    const status = await api('/api/status');
    const model = $('model-state');
    // The test encoder is not CLIP: the badge says so (amber), as the status does.
    const modelState = !status.model.loaded ? 'missing' : status.model.testEncoder ? 'test' : 'clip';
    model.textContent = { clip: `CLIP ${status.model.backbone}`, test: 'test encoder (not CLIP)', missing: 'model missing' }[modelState];
    model.className = `badge ${{ clip: 'ok', test: 'warn', missing: 'off' }[modelState]}`;
    model.title = status.model.error || status.model.note || '';
    // The LLM badge tells what the LLM last did, not only that it is configured.
    const llm = $('llm-state');
    const llmState = status.llm.enabled ? status.llm.state : 'disabled';
    llm.textContent = { ok: `LLM: ${status.llm.model}`, checking: 'LLM: checking…', error: 'LLM error', disabled: 'LLM disabled' }[llmState];
    llm.className = `badge ${{ ok: 'ok', checking: '', error: 'off', disabled: 'off' }[llmState]}`;
    llm.title = status.llm.error || status.llm.reason || '';
    $('use-ai').disabled = !status.llm.enabled;
    if (status.auth && status.auth.loginUrl) $('login-url').textContent = status.auth.loginUrl;
    const idx = status.index;
    const list = $('index-status');
    list.replaceChildren();
    row(list, 'vectors', String(idx.totalVectors));
    row(list, 'main', `${idx.main.kind} (${idx.main.vectors})`);
    row(list, 'buffer', `${idx.buffer.vectors} / ${idx.buffer.threshold}`, idx.buffer.mergeSuggested ? 'suggest' : '');
    if (idx.buffer.mergeSuggested) row(list, '', 'merge suggested', 'suggest');
    row(list, 'deleted', String(idx.deleted));
    row(list, 'training', idx.training.message);
    if (idx.job)
      row(list, 'job', `${idx.job.op}: ${idx.job.state} ${idx.job.state === 'running' ? `${idx.job.phase} ${Math.round(idx.job.progress * 100)}%` : ''}`);
    // The bucket source's state (admins get it: it names object keys): last sync, lag, skipped objects, last error.
    const source = status.source;
    if (source && source.kind === 'bucket' && source.url) {
      row(list, 'source', source.url);
      row(list, 'last sync', source.lastSync ? `${source.lastSync.finishedAt} (${source.lagSeconds} s ago)` : source.syncing ? 'syncing…' : 'not yet');
      const skipped = source.lastSync ? source.lastSync.skipped : [];
      if (skipped.length) {
        row(list, 'skipped', `${skipped.length} object(s)`, 'suggest');
        for (const s of skipped.slice(0, 10)) row(list, '', `${s.key}: ${s.reason}`, 'suggest');
      }
      if (source.lastError) row(list, 'sync error', `${source.lastError} (${source.lastErrorAt})`, 'error');
    }
    const running = idx.job && idx.job.state === 'running';
    $('merge').disabled = running;
    $('rebuild').disabled = running;
  } catch (err) {
    showMessage(`status unavailable: ${err.message}`, true);
  }
}

refreshStatus();
setInterval(refreshStatus, 3000);
