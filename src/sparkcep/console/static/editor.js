/* The rule editor: a draft as JSON, its errors marked at their fields, hints per field, validate, create, and
 * a new version of the rule being edited.
 */
import {$, enc, h, notify} from './dom.js';
import {fmtValue} from './format.js';
import {api, failureText, showFailure} from './http.js';
import {lineOf, locatePaths, normalizeError, normalizeErrors, pathFromParts, splitPath} from './paths.js';
import {cards, lastRules, loadRules, renderRules} from './rules.js';
import {fieldHelp, requiredFields} from './ruletypes.js';

const META_FIELDS = ['version', 'state', 'effective_from', 'effective_from_ms'];
export const AUTHOR_KEY = 'sparkcep.console.author';

export const editing = {id: null, version: null};
let currentErrors = [];

export const textarea = () => $('#editor');

export function setDraft(rule) {
  textarea().value = JSON.stringify(rule, null, 2);
  clearValidation();
  refreshEditorDecorations();
}

export function startEditing(rule) {
  const definition = {...(rule.rule || {})};
  for (const field of META_FIELDS) delete definition[field];
  if (!definition.id) definition.id = rule.id;
  editing.id = String(rule.id);
  editing.version = rule.version;
  setDraft(definition);
  const mode = $('#editor-mode');
  mode.textContent = `editing ${editing.id} (v${rule.version ?? '?'}) — saving records v${(rule.version || 0) + 1}`;
  mode.classList.add('editing');
  $('#save-version').hidden = false;
  $('#cancel-edit').hidden = false;
  $('#create').hidden = true;
  renderRules(lastRules);
  textarea().focus();
  textarea().scrollIntoView({block: 'nearest', behavior: 'smooth'});
}

export function stopEditing() {
  editing.id = null;
  editing.version = null;
  const mode = $('#editor-mode');
  mode.textContent = 'new rule';
  mode.classList.remove('editing');
  $('#save-version').hidden = true;
  $('#cancel-edit').hidden = true;
  $('#create').hidden = false;
  renderRules(lastRules);
}

/** Parse the draft; on a syntax error show it at its position and return undefined. */
export function readDraft() {
  const text = textarea().value;
  if (!text.trim()) {
    showErrors([{field: '', message: 'the editor is empty: write a rule or pick a template'}]);
    return undefined;
  }
  try {
    const rule = JSON.parse(text);
    if (!rule || typeof rule !== 'object' || Array.isArray(rule)) {
      showErrors([{field: '', message: 'a rule is one JSON object'}]);
      return undefined;
    }
    return rule;
  } catch (error) {
    const match = /position (\d+)/.exec(error.message);
    const offset = match ? Number(match[1]) : (locatePaths(text).failedAt ?? null);
    const where = offset === null ? '' : ` (line ${lineOf(text, offset)})`;
    showErrors([{field: '', message: `not valid JSON${where}: ${error.message}`, offset}]);
    return undefined;
  }
}

/** The text range an error points at: the field itself, or (a missing field) the opening of its nearest parent. */
function rangeOf(error, paths) {
  if (typeof error.offset === 'number') return {start: error.offset, end: error.offset + 1, parent: false};
  const parts = splitPath(error.field || '');
  for (let n = parts.length; n >= 0; n -= 1) {
    const spot = paths.get(pathFromParts(parts.slice(0, n)));
    if (!spot) continue;
    if (n === parts.length) {
      if (n === 0) return null; // the whole rule: shown in the list, not marked
      return {start: spot.keyStart, end: spot.end, parent: false};
    }
    // Mark the parent's key and its opening bracket, not the whole object.
    const text = textarea().value;
    let open = spot.start;
    while (open < spot.end && text[open] !== '{' && text[open] !== '[') open += 1;
    return {start: spot.keyStart, end: Math.min(spot.end, open + 1), parent: true};
  }
  return null;
}

export function refreshEditorDecorations() {
  const text = textarea().value;
  const paths = locatePaths(text);
  const ranges = [];
  currentErrors.forEach((error, index) => {
    const range = rangeOf(error, paths);
    if (range && range.end > range.start) ranges.push({...range, index});
  });
  ranges.sort((a, b) => a.start - b.start || b.end - a.end);
  const pieces = [];
  let at = 0;
  for (const range of ranges) {
    if (range.start < at) continue; // nested in one already marked
    pieces.push(text.slice(at, range.start));
    pieces.push(h('mark', {class: range.parent ? 'parent' : '', dataset: {error: String(range.index)}},
      text.slice(range.start, range.end)));
    at = range.end;
  }
  pieces.push(text.slice(at), '\n ');
  $('.editor-highlights').replaceChildren(...pieces);
  syncScroll();
  renderHints(text);
}

export function syncScroll() {
  const backdrop = $('.editor-backdrop');
  backdrop.scrollTop = textarea().scrollTop;
  backdrop.scrollLeft = textarea().scrollLeft;
}

function renderHints(text) {
  let draft = null;
  try { draft = JSON.parse(text); } catch { /* fall back to the errors only */ }
  const fields = [];
  if (draft && typeof draft === 'object' && !Array.isArray(draft)) fields.push(...Object.keys(draft));
  const required = requiredFields(draft);
  for (const field of required) if (!fields.includes(field)) fields.push(field);
  const errorsByTop = new Map();
  for (const error of currentErrors) {
    const top = String(splitPath(error.field || '')[0] ?? '');
    if (!top) continue;
    if (!fields.includes(top)) fields.push(top);
    if (!errorsByTop.has(top)) errorsByTop.set(top, []);
    errorsByTop.get(top).push(error);
  }
  const items = fields.map((field) => {
    const errors = errorsByTop.get(field) || [];
    const missing = !(draft && typeof draft === 'object' && field in draft);
    const what = errors.length
      ? errors.map((e) => `${e.field !== field ? `${e.field.slice(field.length).replace(/^\./, '')}: ` : ''}${e.message}`).join('; ')
      : (missing ? `missing — ${fieldHelp(field, draft) || 'required'}` : fieldHelp(field, draft));
    return h('li', {
      class: `field-hint${errors.length ? ' has-error' : ''}${missing ? ' missing' : ''}`, testid: 'field-hint',
      dataset: {field},
    }, h('code', {}, field), h('span', {class: 'what'}, what));
  });
  if (!items.length) items.push(h('li', {class: 'muted'}, 'pick a template or write a rule'));
  $('#field-hints-list').replaceChildren(...items);
}

export function showErrors(errors) {
  currentErrors = errors.map(normalizeError).map((e, i) => ({...e, offset: errors[i].offset}));
  const list = $('#validation-errors');
  list.replaceChildren(...currentErrors.map((error, index) => {
    const parts = [];
    if (error.expected !== undefined && error.expected !== null) parts.push(`expected ${fmtValue(error.expected)}`);
    if (error.got !== undefined && error.got !== null) parts.push(`got ${fmtValue(error.got)}`);
    return h('li', {
      class: 'field-error', testid: 'field-error', dataset: {field: error.field}, tabindex: '0',
      title: 'Show in the editor', onclick: () => selectError(index),
      onkeydown: (e) => { if (e.key === 'Enter') selectError(index); },
    },
      h('span', {class: 'field-path', testid: 'field-path'}, error.field || '(rule)'),
      h('span', {}, error.message,
        parts.length && !error.message.includes('expected') ? h('span', {class: 'detail'}, ` — ${parts.join(', ')}`) : null));
  }));
  $('#editor-sentence').hidden = true;
  refreshEditorDecorations();
}

function selectError(index) {
  const error = currentErrors[index];
  const range = error && rangeOf(error, locatePaths(textarea().value));
  const ta = textarea();
  ta.focus();
  if (range) {
    ta.setSelectionRange(range.start, range.end);
    // Bring the selection into view: approximate by line height.
    const line = lineOf(ta.value, range.start);
    const lineHeight = parseFloat(getComputedStyle(ta).lineHeight) || 18;
    ta.scrollTop = Math.max(0, (line - 3) * lineHeight);
    syncScroll();
  }
}

export function clearValidation() {
  currentErrors = [];
  $('#validation-errors').replaceChildren();
  $('#editor-sentence').hidden = true;
  refreshEditorDecorations();
}

function showSentence(sentence, prefix) {
  const el = $('#editor-sentence');
  el.textContent = `${prefix}${sentence || ''}`;
  el.hidden = !sentence && !prefix;
}

function authorField() {
  const author = $('#author').value.trim();
  try { localStorage.setItem(AUTHOR_KEY, author); } catch { /* not kept */ }
  return author || undefined;
}

export async function withBusy(button, work) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try { return await work(); } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

export async function validateDraft() {
  const rule = readDraft();
  if (rule === undefined) return;
  await withBusy($('#validate'), async () => {
    try {
      const result = await api('POST', '/api/validate', {rule});
      if (result && result.ok) {
        clearValidation();
        showSentence(result.sentence, 'Valid: ');
      } else {
        showErrors(normalizeErrors(result));
      }
    } catch (error) {
      if (error.status === 422) showErrors(normalizeErrors(error.body));
      else showFailure('validate', error);
    }
  });
}

/** Create or save a version: the stored sentence and a notice, or each refusal next to its field. */
async function writeRule(button, done, send) {
  const rule = readDraft();
  if (rule === undefined) return;
  await withBusy(button, async () => {
    try {
      const stored = await send(rule);
      const id = String(stored.id);
      clearValidation();
      showSentence(stored.sentence, `${done} ${id} v${stored.version}: `);
      notify('ok', `${done.toLowerCase()} ${id} v${stored.version}: ${whenEffective(stored)}`);
      if (editing.id) stopEditing();
      await loadRules();
      flashCard(id);
    } catch (error) {
      if (error.status === 422) {
        showErrors(normalizeErrors(error.body));
        notify('error', `not ${done.toLowerCase()}: ${failureText(error.body) || 'the rule does not validate'}`, 422);
      } else showFailure(done.toLowerCase(), error);
    }
  });
}

export function createRule() {
  return writeRule($('#create'), 'Created', (rule) => api('POST', '/api/rules', {rule, author: authorField()}));
}

export function saveVersion() {
  if (!editing.id) return undefined;
  const id = editing.id;
  return writeRule($('#save-version'), 'Saved', (rule) => api('PUT', `/api/rules/${enc(id)}`, {rule, author: authorField()}));
}

/** Aggregate and pattern versions wait for the job to give them an event time; the others apply at once. */
function whenEffective(stored) {
  return (stored.badges || []).includes('PENDING')
    ? "PENDING until the job's next micro-batch gives it its effective time"
    : "the job applies it on its next micro-batch";
}

function flashCard(id) {
  const card = cards.get(id);
  if (!card) return;
  card.el.scrollIntoView({block: 'nearest', behavior: 'smooth'});
  card.el.classList.add('flash');
  setTimeout(() => card.el.classList.remove('flash'), 1800);
}
