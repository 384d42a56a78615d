/* Live alerts: the stream for the filters in the form, newest first, held while paused, each with its
 * explanation.
 */
import {$, h, notify} from './dom.js';
import {fmtKey, fmtTime, fmtValue, parseTime} from './format.js';
import {api, AuthorizedEventSource} from './http.js';

const INITIAL_ALERTS = 50;
const MAX_ALERTS = 200;

let source = null;
let streamGeneration = 0;
export const seenAlerts = new Set();

function alertIdentity(alert) {
  return alert.event_id ? `${alert.rule_id}|${alert.event_id}` : JSON.stringify(alert);
}

function setStream(state, text) {
  const el = $('.stream-state');
  el.classList.toggle('is-up', state === 'up');
  el.classList.toggle('is-down', state === 'down');
  el.classList.toggle('is-waiting', state === 'waiting');
  el.dataset.state = state;
  $('.stream-text', el).textContent = text;
}

function filters() {
  return {rule_id: $('#filter-rule').value.trim(), key: $('#filter-key').value.trim()};
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== '' && value !== null && value !== undefined) search.set(name, value);
  const text = search.toString();
  return text ? `?${text}` : '';
}

let streamFilters = null;

/** (Re)open the stream for the filters in the form; nothing to do when they did not change. */
export function applyFilters() {
  const wanted = JSON.stringify(filters());
  if (source && source.readyState !== EventSource.CLOSED && wanted === streamFilters) return;
  connectAlerts();
}

export function connectAlerts() {
  streamFilters = JSON.stringify(filters());
  streamGeneration += 1;
  const generation = streamGeneration;
  if (source) source.close();
  source = null;
  seenAlerts.clear();
  $('#alerts-list').replaceChildren();
  updateAlertCount();
  resumeAlerts(false); // other filters, another list: what was held belongs to the old one
  const {rule_id: ruleId, key} = filters();
  const label = [ruleId && `rule ${ruleId}`, key && `key ${key}`].filter(Boolean).join(', ');
  setStream('waiting', 'connecting…');
  // The stream sends what is written after it opened; on every (re)connection the newest alerts so far fill
  // the gap before it. Duplicates are dropped by event id.
  const stream = new AuthorizedEventSource(`/api/alerts/stream${query({rule_id: ruleId, key})}`);
  source = stream;
  stream.onopen = async () => {
    setStream('up', `live${label ? ` — ${label}` : ''}`);
    try {
      const recent = await api('GET', `/api/alerts${query({rule_id: ruleId, key, limit: INITIAL_ALERTS})}`);
      if (generation !== streamGeneration) return;
      const list = Array.isArray(recent) ? recent : (recent && recent.alerts) || [];
      for (const alert of list) addAlert(alert, false);
    } catch (error) {
      if (generation === streamGeneration) notify('error', `could not read the alerts: ${error.message}`, error.status);
    }
  };
  stream.onerror = () => {
    if (generation !== streamGeneration) return;
    // EventSource retries by itself; say so instead of failing silently.
    if (stream.readyState === EventSource.CLOSED) setStream('down', 'stream closed — change a filter to retry');
    else setStream('waiting', 'stream interrupted — reconnecting…');
  };
  const onAlert = (event) => {
    if (generation !== streamGeneration) return;
    let alert;
    try { alert = JSON.parse(event.data); } catch { return; }
    addAlert(alert, true);
  };
  stream.addEventListener('alert', onAlert);
  stream.onmessage = onAlert; // servers that send unnamed events
}

/** Insert newest first by event time (arrival order among equal times), keeping at most MAX_ALERTS. */
function addAlert(alert, fresh) {
  if (!alert || typeof alert !== 'object') return;
  const identity = alertIdentity(alert);
  if (seenAlerts.has(identity)) return;
  if (held.on) {
    holdAlert(identity, alert, fresh);
    return;
  }
  seenAlerts.add(identity);
  const list = $('#alerts-list');
  const item = alertItem(alert, fresh);
  const at = parseTime(alert.occurred_at) ?? Number.MAX_SAFE_INTEGER;
  item.dataset.at = String(at);
  let before = list.firstElementChild;
  while (before && Number(before.dataset.at) > at) before = before.nextElementSibling;
  if (!fresh) while (before && Number(before.dataset.at) === at) before = before.nextElementSibling;
  list.insertBefore(item, before);
  while (list.children.length > MAX_ALERTS) {
    const last = list.lastElementChild;
    seenAlerts.delete(last.dataset.identity);
    last.remove();
  }
  updateAlertCount();
}

/* Pause: the list holds still under the cursor; alerts that arrive meanwhile are counted and kept (the newest
 * MAX_ALERTS of them, as many as the list shows) and go into the list on resume. */
export const held = {on: false, alerts: [], ids: new Set()};

function holdAlert(identity, alert, fresh) {
  if (held.ids.has(identity)) return;
  held.ids.add(identity);
  held.alerts.push([alert, fresh]);
  if (held.alerts.length > MAX_ALERTS) held.alerts.shift();
  updateHeld();
}

export function pauseAlerts() {
  held.on = true;
  updateHeld();
}

/** Resume the list; ``show`` false drops what was held (the list was replaced). */
export function resumeAlerts(show = true) {
  const waiting = held.alerts.splice(0);
  held.ids.clear();
  held.on = false;
  if (show) for (const [alert, fresh] of waiting) addAlert(alert, fresh);
  updateHeld();
}

function updateHeld() {
  const count = held.ids.size;
  const button = $('#alerts-pause');
  button.textContent = held.on ? `Resume${count ? ` (${count} new)` : ''}` : 'Pause';
  button.setAttribute('aria-pressed', String(held.on));
  button.classList.toggle('is-paused', held.on);
  const note = $('#alerts-held');
  note.textContent = held.on ? `paused: ${count} new` : '';
  note.dataset.count = String(count);
  note.hidden = !held.on;
  $('#alerts-list').classList.toggle('is-paused', held.on);
}

export function updateAlertCount() {
  const n = $('#alerts-list').children.length;
  $('[data-testid="alerts-count"]').textContent = n ? `(${n}${n >= MAX_ALERTS ? ', newest kept' : ''})` : '';
  $('#alerts-empty').hidden = n > 0;
}

let alertSerial = 0;

export function alertItem(alert, fresh, testid = 'alert-item') {
  alertSerial += 1;
  const detailsId = `alert-details-${alertSerial}`;
  const version = alert.rule_version ?? alert.pattern_version;
  const details = h('div', {class: 'alert-details', id: detailsId, testid: 'alert-explanation', hidden: true});
  const summary = h('button', {
    type: 'button', class: 'alert-summary', testid: 'alert-summary', 'aria-expanded': 'false', 'aria-controls': detailsId,
  },
    h('span', {class: 'alert-time'}, fmtTime(alert.occurred_at)),
    h('span', {class: 'alert-type'}, alert.event_type || 'ALERT'),
    h('span', {class: 'alert-rule'}, `${alert.rule_id ?? '?'}${version !== undefined ? ` v${version}` : ''} · ${fmtKey(alert)}`),
    h('span', {class: 'alert-expl'}, alert.explanation || ''));
  const item = h('li', {
    class: `alert-item${fresh ? ' fresh' : ''}`, testid,
    dataset: {ruleId: String(alert.rule_id ?? ''), eventType: String(alert.event_type ?? ''), key: String(alert.key_text ?? ''), identity: alertIdentity(alert)},
  }, summary, details);
  summary.addEventListener('click', () => {
    const open = details.hidden;
    if (open && !details.childNodes.length) details.append(...explanation(alert).filter(Boolean));
    details.hidden = !open;
    summary.setAttribute('aria-expanded', String(open));
    item.classList.toggle('open', open);
  });
  return item;
}

function explanation(alert) {
  const version = alert.rule_version ?? alert.pattern_version;
  const rows = [];
  const row = (name, value) => {
    if (value === undefined || value === null || value === '') return;
    rows.push(h('dt', {}, name), h('dd', {testid: `alert-field-${name.replace(/\W+/g, '-')}`}, value));
  };
  row('rule', `${alert.rule_id}${version !== undefined ? ` version ${version}` : ''}`);
  row('alert type', alert.event_type);
  row('at', fmtTime(alert.occurred_at));
  row('key', fmtKey(alert));
  if (alert.window) {
    const w = alert.window;
    row('window', `${w.size || ''} (${fmtTime(w.start_exclusive)} exclusive → ${fmtTime(w.end_inclusive)} inclusive)`);
  }
  if (alert.aggregate) {
    const a = alert.aggregate;
    row('value', `${a.function || ''}${a.field ? `(${a.field})` : ''} = ${fmtValue(a.value)}`);
  }
  if (alert.limit) {
    const l = alert.limit;
    row('limit', typeof l === 'object' ? `${l.operator || ''} ${fmtValue(l.value)}` : fmtValue(l));
  }
  row('events in window', alert.events_in_window);
  row('trigger event', alert.trigger_event_id);
  if (alert.measures && Object.keys(alert.measures).length) {
    row('values', Object.entries(alert.measures).map(([k, v]) => `${k} = ${fmtValue(v)}`).join(', '));
  }
  if (alert.first_event_at || alert.last_event_at) row('matched between', `${fmtTime(alert.first_event_at)} → ${fmtTime(alert.last_event_at)}`);
  if (alert.timed_out) row('timed out', `no completion within ${alert.within || '?'}`);
  let stages = null;
  if (alert.stages && typeof alert.stages === 'object') {
    stages = h('ul', {class: 'stages', testid: 'alert-stages'},
      Object.entries(alert.stages).map(([stage, events]) => h('li', {},
        h('code', {}, stage), ': ',
        (Array.isArray(events) ? events : []).map((e) => `${e.event_id} at ${fmtTime(e.occurred_at)}`).join('; '))));
  }
  return [
    h('p', {class: 'explanation', testid: 'alert-explanation-text'}, alert.explanation || 'no explanation was given for this alert'),
    h('dl', {}, rows),
    stages ? h('h3', {}, 'Matched events') : null,
    stages,
    h('details', {}, h('summary', {}, 'the alert as written'), h('pre', {}, JSON.stringify(alert, null, 2))),
  ];
}
