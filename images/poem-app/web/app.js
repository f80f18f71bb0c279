// Strata Poet page: choose a form, enter a theme, generate, download, save, browse recent works.
import { ApiError, accessKey, deletePoem, fetchInfo, fetchPoemTypes, fetchPoems, generatePoem, savePoem, setAccessKey } from './api.js';

const MAX_THEME = 200;

const el = {
  form: document.getElementById('poem-form'),
  type: document.getElementById('poem-type'),
  typeHint: document.getElementById('type-hint'),
  theme: document.getElementById('theme'),
  themeCount: document.getElementById('theme-count'),
  themeError: document.getElementById('theme-error'),
  generate: document.getElementById('generate'),
  generateLabel: document.querySelector('#generate .button__label'),
  status: document.getElementById('status'),
  result: document.getElementById('result'),
  meta: document.getElementById('poem-meta'),
  empty: document.getElementById('poem-empty'),
  loading: document.getElementById('poem-loading'),
  poem: document.getElementById('poem-text'),
  download: document.getElementById('download'),
  save: document.getElementById('save'),
  saveLabel: document.querySelector('#save .button__label'),
  historyList: document.getElementById('history-list'),
  historyEmpty: document.getElementById('history-empty'),
  historyError: document.getElementById('history-error'),
  refreshHistory: document.getElementById('refresh-history'),
  modelNote: document.getElementById('model-note'),
  access: document.getElementById('access'),
  accessKey: document.getElementById('access-key'),
  writesOff: document.getElementById('writes-off'),
};

/** @type {Array<{code: string, label: string, description: string}>} */
let poemTypes = [];
/** The poem on screen: {typeLabel, theme, content, savedId, model} or null. */
let current = null;
let generating = false;
/** Whether this server lets the page change the history ('open', 'key' or 'disabled'). */
let historyWrites = 'open';

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** A new `tag` element with its class and, when given, its text. */
function make(tag, className, text) {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One message in the status banner; `hint` (what to do about it) goes on a line of its own. */
function setStatus(message, kind = 'info', hint = '') {
  if (!message) {
    el.status.replaceChildren();
    return;
  }
  const line = make('p', `status status--${kind}`, message);
  if (hint) line.append(make('span', 'status__hint', hint));
  el.status.replaceChildren(line);
}

function errorText(err) {
  return err instanceof ApiError ? err.message : String(err);
}

function errorHint(err) {
  return err instanceof ApiError && err.hint ? err.hint : '';
}

function showThemeError(message) {
  el.themeError.textContent = message;
  el.themeError.hidden = !message;
  if (message) el.theme.setAttribute('aria-invalid', 'true');
  else el.theme.removeAttribute('aria-invalid');
}

function selectedType() {
  return poemTypes.find((t) => t.code === el.type.value);
}

function updateTypeHint() {
  el.typeHint.textContent = selectedType()?.description ?? '';
}

function updateThemeCount() {
  el.themeCount.textContent = `${el.theme.value.length} / ${MAX_THEME}`;
}

/** Show one of: the empty placeholder, the loading skeleton, or a poem. */
function renderResult(state) {
  el.empty.hidden = state !== 'empty';
  el.loading.hidden = state !== 'loading';
  el.poem.hidden = state !== 'poem';
  el.result.setAttribute('aria-busy', String(state === 'loading'));
  if (state === 'poem' && current) {
    // One block per line, so a line that wraps on a narrow screen gets a hanging indent (see .poem__line).
    el.poem.replaceChildren(...current.content.split('\n').map((text) => make('div', 'poem__line', text)));
    el.meta.textContent = `${current.typeLabel} · “${current.theme}”${current.model ? ` · written by ${current.model}` : ''}`;
  } else if (state !== 'poem') {
    el.meta.textContent = '';
  }
  el.download.disabled = state !== 'poem';
  const saved = Boolean(current?.savedId);
  el.save.disabled = state !== 'poem' || saved || historyWrites === 'disabled';
  el.saveLabel.textContent = saved ? 'Saved' : 'Save to history';
  markCurrentInHistory();
}

function setGenerating(busy) {
  generating = busy;
  el.generate.disabled = busy || poemTypes.length === 0;
  el.generate.classList.toggle('is-busy', busy);
  el.generateLabel.textContent = busy ? 'Writing…' : 'Generate';
}

async function onGenerate(event) {
  event.preventDefault();
  if (generating) return;
  const type = selectedType();
  const theme = el.theme.value.replace(/\s+/g, ' ').trim();
  if (!type) {
    setStatus('Choose a poem type first.', 'error');
    el.type.focus();
    return;
  }
  if (!theme) {
    showThemeError('Please enter a theme for your poem.');
    setStatus('A theme is needed before a poem can be written.', 'error');
    el.theme.focus();
    return;
  }
  showThemeError('');
  setGenerating(true);
  const previous = current;
  renderResult('loading');
  setStatus(`Writing your ${type.label.toLowerCase()} on “${theme}”…`);
  try {
    const { poem: content, model } = await generatePoem(type.code, theme);
    current = { typeLabel: type.label, theme, content, savedId: null, model };
    renderResult('poem');
    setStatus(`Your ${type.label.toLowerCase()} by ${model} is ready.`, 'success');
    el.poem.focus({ preventScroll: false });
  } catch (err) {
    current = previous;
    renderResult(current ? 'poem' : 'empty');
    const message = errorText(err);
    if (err instanceof ApiError && err.status === 400 && /theme/.test(message)) showThemeError(message);
    setStatus(`Could not write the poem: ${message}`, 'error', errorHint(err));
  } finally {
    setGenerating(false);
  }
}

function slug(text) {
  const s = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 50)
    .replace(/-+$/, '');
  return s || 'poem';
}

function onDownload() {
  if (!current) return;
  const text = `${current.typeLabel}: ${current.theme}\n\n${current.content}\n`;
  const blob = new Blob([text], { type: 'text/plain;charset=utf-8' });
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = `${slug(current.typeLabel)}-${slug(current.theme)}.txt`;
  document.body.append(link);
  link.click();
  link.remove();
  // Give the browser a moment to start the download before the blob URL goes away.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  setStatus(`Downloaded ${link.download}.`, 'success');
}

async function onSave() {
  if (!current || current.savedId) return;
  el.save.disabled = true;
  el.saveLabel.textContent = 'Saving…';
  try {
    const saved = await savePoem(current.typeLabel, current.theme, current.content, current.model);
    current = { ...current, savedId: saved.id };
    setStatus('Saved to your recent works.', 'success');
    await loadHistory();
  } catch (err) {
    setStatus(`Could not save the poem: ${errorText(err)}`, 'error', errorHint(err));
    if (err instanceof ApiError && err.status === 401) el.access.open = true;
  } finally {
    renderResult(current ? 'poem' : 'empty');
  }
}

function historyItem(poem) {
  const li = document.createElement('li');
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'history__item';
  button.dataset.id = String(poem.id);

  const top = make('span', 'history__top');
  const time = make('time', 'history__date', dateFormat.format(new Date(poem.createdAt)));
  time.dateTime = poem.createdAt;
  top.append(make('span', 'badge', poem.type), time);

  button.append(top, make('span', 'history__theme', poem.theme), make('span', 'history__preview', poem.content));
  const remove = make('button', 'button button--quiet history__delete', 'Delete');
  remove.type = 'button';
  remove.hidden = historyWrites === 'disabled';
  remove.setAttribute('aria-label', `Delete the ${poem.type.toLowerCase()} on “${poem.theme}”`);
  remove.addEventListener('click', () => onDelete(poem));
  button.setAttribute('aria-label', `${poem.type} on “${poem.theme}”, saved ${time.textContent}. Show this poem.`);
  button.addEventListener('click', () => {
    current = { typeLabel: poem.type, theme: poem.theme, content: poem.content, savedId: poem.id, model: poem.model ?? null };
    renderResult('poem');
    setStatus(`Showing your saved ${poem.type.toLowerCase()} on “${poem.theme}”.`);
    el.result.scrollIntoView({ block: 'start', behavior: 'smooth' });
  });
  li.className = 'history__entry';
  li.append(button, remove);
  return li;
}

async function onDelete(poem) {
  try {
    await deletePoem(poem.id);
    if (current?.savedId === poem.id) current = { ...current, savedId: null };
    setStatus(`Deleted the ${poem.type.toLowerCase()} on “${poem.theme}”.`, 'success');
    await loadHistory();
    renderResult(current ? 'poem' : 'empty');
    el.refreshHistory.focus();
  } catch (err) {
    setStatus(`Could not delete the poem: ${errorText(err)}`, 'error', errorHint(err));
    if (err instanceof ApiError && err.status === 401) el.access.open = true;
  }
}

/** Which model writes here, and how to use another; and whether this server lets the page change history. */
async function loadInfo() {
  try {
    const info = await fetchInfo();
    historyWrites = info.historyWrites;
    const parts = [`Poems here are written by ${info.model} at ${info.origin}.`];
    if (info.model === 'strata-tiny') {
      parts.push('strata-tiny is Strata’s test model: by design it answers token ids (numbers), not words. The built-in strata-verse writes verse-like lines.');
    } else if (info.model === 'strata-verse') {
      parts.push('strata-verse is Strata’s small built-in model, trained on a few hundred songs and poems: expect verse-like lines, not polished poems.');
    }
    parts.push('To use a real provider, start the poem app with API_BASE_URL (an OpenAI-compatible /v1 URL), API_KEY and API_MODEL.');
    el.modelNote.textContent = parts.join(' ');
  } catch (err) {
    el.modelNote.textContent = `Could not read the model settings: ${errorText(err)}`;
  }
  el.access.hidden = historyWrites !== 'key';
  el.writesOff.hidden = historyWrites !== 'disabled';
  renderResult(current ? 'poem' : 'empty');
}

function markCurrentInHistory() {
  for (const button of el.historyList.querySelectorAll('.history__item')) {
    const isCurrent = current?.savedId !== undefined && current?.savedId !== null && button.dataset.id === String(current.savedId);
    if (isCurrent) button.setAttribute('aria-current', 'true');
    else button.removeAttribute('aria-current');
  }
}

async function loadHistory() {
  try {
    const poems = await fetchPoems();
    el.historyList.replaceChildren(...poems.map(historyItem));
    el.historyEmpty.hidden = poems.length > 0;
    el.historyError.hidden = true;
    markCurrentInHistory();
  } catch (err) {
    el.historyError.textContent = `Could not load recent works: ${err instanceof ApiError ? err.message : String(err)}`;
    el.historyError.hidden = false;
  }
}

async function loadPoemTypes() {
  try {
    poemTypes = await fetchPoemTypes();
    el.type.replaceChildren(
      ...poemTypes.map((t) => {
        const option = document.createElement('option');
        option.value = t.code;
        option.textContent = t.label;
        return option;
      }),
    );
    el.type.disabled = false;
    updateTypeHint();
  } catch (err) {
    el.type.replaceChildren(new Option('Poem types unavailable', ''));
    setStatus(`Could not load the poem types: ${err instanceof ApiError ? err.message : String(err)} Reload to try again.`, 'error');
  }
  setGenerating(false);
}

el.form.addEventListener('submit', onGenerate);
el.type.addEventListener('change', updateTypeHint);
el.theme.addEventListener('input', () => {
  updateThemeCount();
  if (el.theme.value.trim()) showThemeError('');
});
el.download.addEventListener('click', onDownload);
el.save.addEventListener('click', onSave);
el.refreshHistory.addEventListener('click', loadHistory);
el.accessKey.value = accessKey();
el.accessKey.addEventListener('change', () => setAccessKey(el.accessKey.value.trim()));

updateThemeCount();
renderResult('empty');
el.generate.disabled = true; // until the poem types have loaded
void loadPoemTypes();
void loadInfo().then(loadHistory);
