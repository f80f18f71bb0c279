// Strata image search web UI: plain DOM, no dependencies (works offline).
'use strict';

const $ = (id) => document.getElementById(id);

function showMessage(text, isError = false) {
  $('message').textContent = text;
  $('message').className = isError ? 'error' : '';
}

async function api(path, options = {}) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`);
  return body;
}

function postJson(path, payload) {
  return api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload ?? {}) });
}

function renderResults(results) {
  const grid = $('results');
  grid.replaceChildren();
  for (const r of results) {
    const card = document.createElement('figure');
    card.className = 'card';
    card.dataset.id = String(r.id);
    const img = document.createElement('img');
    img.src = r.url;
    img.alt = r.path;
    img.loading = 'lazy';
    const meta = document.createElement('figcaption');
    meta.className = 'meta';
    const distance = document.createElement('div');
    distance.className = 'distance';
    distance.textContent = `distance ${r.distance.toFixed(4)}`;
    const name = document.createElement('div');
    name.textContent = `#${r.id} ${r.path}`;
    meta.append(distance, name);
    card.append(img, meta);
    grid.append(card);
  }
}

function topk() {
  return Number($('topk').value) || 20;
}

$('text-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const query = $('query').value.trim();
  if (!query) return;
  showMessage('searching…');
  $('explanation').hidden = true;
  try {
    if ($('use-ai').checked) {
      const body = await postJson('/api/search/rag', { query, topk: topk(), use_expansion: true });
      renderResults(body.results);
      $('explanation').hidden = false;
      $('explanation').textContent = body.note || `${body.ai_explanation} (queries: ${body.expanded_queries.join(' | ')})`;
      showMessage(`${body.total_results} results`);
    } else {
      const body = await postJson('/search', { query, topk: topk() });
      renderResults(body.results);
      showMessage(`${body.total_results} results for “${query}”`);
    }
  } catch (err) {
    showMessage(err.message, true);
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
  const paths = $('add-paths').value.split('\n').map((p) => p.trim()).filter(Boolean);
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
    const modelState = !status.model.loaded ? 'missing' : status.model.test_encoder ? 'test' : 'clip';
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
    const idx = status.index;
    const list = $('index-status');
    list.replaceChildren();
    row(list, 'vectors', String(idx.total_vectors));
    row(list, 'main', `${idx.main.kind} (${idx.main.vectors})`);
    row(list, 'buffer', `${idx.buffer.vectors} / ${idx.buffer.threshold}`, idx.buffer.merge_suggested ? 'suggest' : '');
    if (idx.buffer.merge_suggested) row(list, '', 'merge suggested', 'suggest');
    row(list, 'deleted', String(idx.deleted));
    row(list, 'training', idx.training.message);
    if (idx.job) row(list, 'job', `${idx.job.op}: ${idx.job.state} ${idx.job.state === 'running' ? `${idx.job.phase} ${Math.round(idx.job.progress * 100)}%` : ''}`);
    const running = idx.job && idx.job.state === 'running';
    $('merge').disabled = running;
    $('rebuild').disabled = running;
  } catch (err) {
    showMessage(`status unavailable: ${err.message}`, true);
  }
}

refreshStatus();
setInterval(refreshStatus, 3000);
