/* The rules panel: the store's rules as cards (state, sentence, actions) and each rule's version history. */
import {$, enc, h, notify} from './dom.js';
import {editing, startEditing} from './editor.js';
import {fmtEffective, fmtTime, fmtValue, normState} from './format.js';
import {api, showFailure} from './http.js';

export const cards = new Map(); // id -> {el, sig, rule}
const expandedHistory = new Set();
let rulesFilter = '';
export let lastRules = [];

export async function loadRules() {
  try {
    const rules = await api('GET', '/api/rules');
    lastRules = Array.isArray(rules) ? rules : (rules && rules.rules) || [];
    renderRules(lastRules);
  } catch (error) {
    if (!cards.size) $('#rules-list').replaceChildren(h('p', {class: 'muted empty'}, `could not load rules: ${error.message}`));
  }
}

function badgesOf(rule) {
  const badges = Array.isArray(rule.badges) && rule.badges.length ? rule.badges : [rule.state];
  return [...new Set(badges.filter(Boolean).map(normState))];
}

function statusOf(badges) {
  for (const name of ['QUARANTINED', 'PENDING', 'PAUSED']) if (badges.includes(name)) return name;
  return badges[0] || 'ACTIVE';
}

/** Show only the rules whose id, type, state, badges or sentence contain every word of ``text``. */
export function filterRules(text) {
  rulesFilter = text.trim().toLowerCase();
  renderRules(lastRules);
}

function matchesFilter(rule) {
  if (!rulesFilter) return true;
  const text = [rule.id, rule.type, rule.state, ...badgesOf(rule), rule.sentence].join(' ').toLowerCase();
  return rulesFilter.split(/\s+/).every((word) => text.includes(word));
}

export function renderRules(rules) {
  const list = $('#rules-list');
  const shown = rules.filter(matchesFilter);
  const keep = new Set();
  for (const rule of shown) {
    const id = String(rule.id);
    keep.add(id);
    const sig = JSON.stringify(rule) + (editing.id === id ? ':editing' : '');
    const existing = cards.get(id);
    if (existing && existing.sig === sig) continue;
    const el = ruleCard(rule);
    if (existing) {
      const old = $('.history', existing.el);
      existing.el.replaceWith(el);
      if (expandedHistory.has(id)) {
        const box = $('.history', el);
        if (old && old.childNodes.length) box.replaceChildren(...old.childNodes);
        box.hidden = false;
        loadHistory(id, box);
      }
    }
    cards.set(id, {el, sig, rule});
  }
  for (const [id, card] of cards) {
    if (!keep.has(id)) {
      card.el.remove();
      cards.delete(id);
    }
  }
  // Put the cards in the server's order, moving only the ones out of place.
  let previous = null;
  for (const rule of shown) {
    const el = cards.get(String(rule.id)).el;
    const wanted = previous ? previous.nextElementSibling : list.firstElementChild;
    if (wanted !== el) {
      if (previous) previous.after(el);
      else list.prepend(el);
    }
    previous = el;
  }
  for (const child of [...list.children]) if (!child.classList.contains('rule-card')) child.remove();
  if (!shown.length) {
    list.append(h('p', {class: 'muted empty', testid: 'rules-empty'},
      rules.length ? 'no rule matches the filter' : 'the store holds no rules yet: create one in the editor'));
  }
  $('[data-testid="rules-count"]').textContent = `(${rules.length})`;
  const options = $('#rule-ids');
  options.replaceChildren(...rules.map((r) => h('option', {value: String(r.id)})));
}

function ruleCard(rule) {
  const id = String(rule.id);
  const badges = badgesOf(rule);
  const status = statusOf(badges);
  const state = normState(rule.state);
  const headingId = `rule-${id.replace(/[^A-Za-z0-9_-]/g, '_')}-title`;
  const historyId = `${headingId}-history`;
  const pending = badges.includes('PENDING');
  let effective;
  if (pending) effective = h('span', {class: 'pending-note'}, 'effective from: pending — the job assigns it on its next micro-batch');
  else if (rule.effective_from) effective = h('span', {}, 'effective from ', h('time', {datetime: String(rule.effective_from)}, fmtEffective(rule.effective_from)));
  else effective = h('span', {}, `recorded ${fmtTime(rule.recorded_at)}${rule.author ? ` by ${rule.author}` : ''}`);

  const quarantine = rule.quarantine || (badges.includes('QUARANTINED') ? {} : null);
  const quarantineBox = quarantine
    ? h('div', {class: 'quarantine', role: 'alert', testid: 'rule-quarantine'},
      h('strong', {}, 'Quarantined by the job'), quarantineText(quarantine))
    : null;

  const historyBox = h('div', {class: 'history', id: historyId, testid: 'history-list', hidden: !expandedHistory.has(id)});
  const historyButton = h('button', {
    type: 'button', testid: 'history', 'aria-expanded': String(expandedHistory.has(id)), 'aria-controls': historyId,
    'aria-label': `Version history of ${id}`,
    onclick: () => toggleHistory(id, historyButton, historyBox),
  }, 'History');

  const actions = [];
  actions.push(h('button', {type: 'button', testid: 'edit', 'aria-label': `Edit ${id}`, onclick: () => startEditing(rule)}, 'Edit'));
  if (state === 'PAUSED') {
    actions.push(h('button', {type: 'button', testid: 'resume', 'aria-label': `Resume ${id}`,
      onclick: (e) => ruleAction(id, 'resume', e.currentTarget)}, 'Resume'));
  } else {
    actions.push(h('button', {type: 'button', testid: 'pause', 'aria-label': `Pause ${id}`,
      onclick: (e) => ruleAction(id, 'pause', e.currentTarget)}, 'Pause'));
  }
  actions.push(deleteButton(id));
  actions.push(historyButton);

  const el = h('article', {
    class: `rule-card${editing.id === id ? ' is-editing' : ''}`, role: 'listitem', testid: `rule-card-${id}`,
    'aria-labelledby': headingId, dataset: {ruleId: id, status, state: state || ''},
  },
    h('div', {class: 'rule-head'},
      h('h3', {class: 'rule-id', id: headingId, testid: 'rule-id'}, id),
      h('span', {class: 'rule-type', testid: 'rule-type'}, rule.type || 'rule'),
      h('span', {class: 'rule-version', testid: 'rule-version'}, `v${rule.version ?? '?'}`),
      h('span', {class: 'badges', 'aria-label': `state: ${badges.join(', ')}`},
        badges.map((b) => h('span', {class: `badge badge-${b}`, testid: 'badge', dataset: {badge: b}}, b)))),
    ruleSentence(rule),
    h('p', {class: 'rule-meta', testid: 'rule-effective-from', dataset: {pending: String(pending)}}, effective),
    quarantineBox,
    h('div', {class: 'rule-actions', role: 'group', 'aria-label': `Actions for ${id}`}, actions),
    historyBox);
  return el;
}

/** The rule in English, as the server words it (patterns included). */
function ruleSentence(rule) {
  return h('p', {class: 'rule-sentence', testid: 'rule-sentence'}, rule.sentence || '');
}

/** ": error" with where and when it failed, from {error, at, key, trigger, errors, paused_at}. */
export function quarantineText(q) {
  if (typeof q === 'string') return `: ${q}`;
  const where = [];
  if (q.at) where.push(`at event time ${fmtTime(q.at)}`);
  if (q.key) where.push(`key ${q.key}`);
  if (q.trigger) where.push(`on ${q.trigger}`);
  if (q.errors) where.push(`${q.errors} error record${q.errors === 1 ? '' : 's'}`);
  if (q.paused_at) where.push(`paused ${fmtTime(q.paused_at)}`);
  return `${where.length ? ` (${where.join(', ')})` : ''}: ${q.error || q.message || 'no error recorded'}`;
}

function deleteButton(id) {
  let timer = null;
  const button = h('button', {type: 'button', class: 'danger', testid: 'delete', 'aria-label': `Delete ${id}`}, 'Delete');
  button.addEventListener('click', () => {
    if (!button.classList.contains('confirming')) {
      // Two clicks instead of window.confirm: a dialog would block the page (and its live updates).
      button.classList.add('confirming');
      button.textContent = 'Confirm delete';
      timer = setTimeout(() => {
        button.classList.remove('confirming');
        button.textContent = 'Delete';
      }, 4000);
      return;
    }
    clearTimeout(timer);
    ruleAction(id, 'delete', button);
  });
  return button;
}

async function ruleAction(id, action, button) {
  if (button) button.disabled = true;
  try {
    const version = action === 'delete'
      ? await api('DELETE', `/api/rules/${enc(id)}`)
      : await api('POST', `/api/rules/${enc(id)}/${action}`);
    const what = {pause: 'paused', resume: 'resumed', delete: 'deleted'}[action];
    const v = version && version.version ? ` (version ${version.version}, effective on the job's next batch)` : '';
    notify('ok', `${id} ${what}${v}`);
    await loadRules();
  } catch (error) {
    showFailure(`${action} ${id}`, error);
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

async function toggleHistory(id, button, box) {
  const open = !expandedHistory.has(id);
  if (open) expandedHistory.add(id);
  else expandedHistory.delete(id);
  button.setAttribute('aria-expanded', String(open));
  box.hidden = !open;
  if (open) await loadHistory(id, box);
}

async function loadHistory(id, box) {
  if (!box.childNodes.length) box.append(h('p', {class: 'muted small'}, 'loading history…'));
  let versions;
  try {
    const data = await api('GET', `/api/rules/${enc(id)}/history`);
    versions = Array.isArray(data) ? data : (data && (data.history || data.versions)) || [];
  } catch (error) {
    box.replaceChildren(h('p', {class: 'muted small'}, `could not load the history: ${error.message}`));
    return;
  }
  const oldest = Math.min(...versions.map((v) => v.seq ?? v.version ?? 0));
  const items = [...versions]
    .sort((a, b) => (b.seq ?? b.version ?? 0) - (a.seq ?? a.version ?? 0))
    .map((v) => historyVersion(v, (v.seq ?? v.version ?? 0) === oldest));
  box.replaceChildren(h('ol', {'aria-label': `Versions of ${id}, newest first`}, items));
}

/** A change of a nested value as the leaves that changed: pattern {…} → {…} becomes pattern.within 2m → 5m. */
function leafChanges(field, before, after, depth = 0) {
  const isObject = (x) => x !== null && typeof x === 'object';
  if (depth > 6 || !isObject(before) || !isObject(after) || Array.isArray(before) !== Array.isArray(after)) {
    return [{field, before, after}];
  }
  const keys = Array.isArray(before)
    ? [...Array(Math.max(before.length, after.length)).keys()]
    : [...new Set([...Object.keys(before), ...Object.keys(after)])];
  const out = [];
  for (const key of keys) {
    const path = Array.isArray(before) ? `${field}[${key}]` : `${field}.${key}`;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
      out.push(...leafChanges(path, before[key], after[key], depth + 1));
    }
  }
  return out.length ? out : [{field, before, after}];
}

function historyVersion(v, first) {
  const state = normState(v.state);
  const changes = Array.isArray(v.changes) ? v.changes : [];
  let body;
  if (first) {
    body = h('p', {class: 'muted small', testid: 'history-first'}, v.change_summary && v.change_summary !== 'new rule'
      ? v.change_summary : 'new rule: the first version');
  } else if (changes.length) {
    body = h('table', {class: 'changes', testid: 'history-changes'},
      h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'field'), h('th', {scope: 'col'}, 'before → after'))),
      h('tbody', {}, changes.flatMap((c) => leafChanges(String(c.field), c.before, c.after)).map((c) => h('tr', {testid: 'history-change', dataset: {field: c.field}},
        h('td', {}, String(c.field)),
        h('td', {},
          h('span', {class: 'before'}, fmtValue(c.before)), h('span', {class: 'arrow', 'aria-label': 'becomes'}, ' → '),
          h('span', {class: 'after'}, fmtValue(c.after)))))));
  } else {
    body = h('p', {class: 'muted small'}, v.change_summary || 'no change to the definition (a state change)');
  }
  return h('li', {class: 'history-version', testid: 'history-version', dataset: {version: String(v.version)}},
    h('div', {class: 'hv-head'},
      h('strong', {}, `v${v.version}`),
      state ? h('span', {class: `badge badge-${state}`}, state) : null,
      h('span', {}, v.effective_from ? `effective from ${fmtEffective(v.effective_from)}` : 'effective from: pending'),
      h('span', {class: 'muted'}, `recorded ${fmtTime(v.recorded_at)}${v.author ? ` by ${v.author}` : ''}`)),
    v.sentence ? h('p', {class: 'hv-sentence', testid: 'history-sentence'}, v.sentence) : null,
    body);
}
