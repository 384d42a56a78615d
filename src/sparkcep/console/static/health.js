/* The job's state, its health tiles and throughput chart, and its late and dead-letter records. */
import {query} from './alerts.js';
import {$, h} from './dom.js';
import {fmtBytes, fmtDuration, fmtNumber, fmtSourceLag, fmtTime, fmtValue, parseTime} from './format.js';
import {api} from './http.js';
import {quarantineText} from './rules.js';

/* ---------- job state ---------- */

const JOB_STATES = ['starting', 'running', 'stopped', 'failed', 'lost', 'unknown'];

function ago(value) {
  const ms = parseTime(value);
  return ms === null ? '' : ` (${fmtDuration(Math.max(Date.now() - ms, 0))} ago)`;
}

/** The job's state from the health answer: what it is, since when, why (lost, unknown, failed), and where. */
function renderJob(job, lastBatchAt) {
  const info = job && typeof job === 'object' ? job : {};
  const state = JOB_STATES.includes(info.state) ? info.state : 'unknown';
  const badge = $('#job-state-badge');
  badge.dataset.state = state;
  badge.textContent = `job ${state}`;
  let since = '';
  if (info.since) since = `${state === 'lost' ? 'last heartbeat' : 'since'} ${fmtTime(info.since)}${ago(info.since)}`;
  $('#job-state-since').textContent = since;
  const reason = $('#job-state-reason');
  reason.textContent = info.reason || '';
  reason.hidden = !info.reason;
  let mode = null;
  if (info.bounded === true) mode = 'ends when caught up';
  else if (info.bounded === false) mode = 'streaming';
  $('#job-state-meta').textContent = [
    info.command && `sparkcep ${info.command}`, mode,
    info.pid !== null && info.pid !== undefined && `pid ${info.pid}`, info.host && `on ${info.host}`,
  ].filter(Boolean).join(' · ');
  if (lastBatchAt !== undefined) { // undefined: not known now, keep what was shown
    $('#job-last-batch').textContent = `last batch: ${lastBatchAt ? `${fmtTime(lastBatchAt)}${ago(lastBatchAt)}` : 'none yet'}`;
  }
  const link = $('#spark-ui-link');
  const address = typeof info.spark_ui === 'string' && /^https?:\/\//i.test(info.spark_ui) ? info.spark_ui : null;
  if (address) {
    link.href = address;
    link.title = address;
  } else {
    link.removeAttribute('href');
  }
  link.hidden = !address;
}

/* ---------- late and dead-letter records ---------- */

export const RECORDS_PAGE = 25;
const RECORD_KINDS = {deadletter: 'dead letters', late: 'late records'};

// before: the total when the list was opened, so paging through it holds still while the job writes more.
export const records = {kind: null, offset: 0, before: null, generation: 0};

export async function openRecords(kind, offset = 0, before = null) {
  if (!RECORD_KINDS[kind]) return;
  records.generation += 1;
  const generation = records.generation;
  for (const button of document.querySelectorAll('.panel-records [data-records]')) {
    button.setAttribute('aria-pressed', String(button.dataset.records === kind));
  }
  const list = $('#records-list');
  list.dataset.state = 'loading';
  list.dataset.kind = kind;
  $('#records-hint').hidden = true;
  let page;
  try {
    page = await api('GET', `/api/records/${kind}${query({offset, limit: RECORDS_PAGE, before})}`);
  } catch (error) {
    if (generation !== records.generation) return;
    list.dataset.state = 'failed';
    list.replaceChildren(h('li', {class: 'quarantine'}, `could not read the ${RECORD_KINDS[kind]}: ${error.message}`));
    $('#records-pager').hidden = true;
    return;
  }
  if (generation !== records.generation) return; // another page was asked for meanwhile
  Object.assign(records, {kind, offset, before: before === null ? page.total : before});
  renderRecords(page || {});
}

function renderRecords(page) {
  const list = $('#records-list');
  const items = Array.isArray(page.records) ? page.records : [];
  const name = RECORD_KINDS[records.kind];
  list.dataset.state = 'done';
  list.replaceChildren(...(items.length ? items.map(recordItem) : [h('li', {class: 'muted empty'}, `no ${name}`)]));
  const shown = records.before;
  $('#records-count').textContent = `(${fmtNumber(page.total)} ${name})`;
  const newer = Number(page.total) - shown;
  $('#records-range').textContent = items.length
    ? `${fmtNumber(records.offset + 1)}–${fmtNumber(records.offset + items.length)} of ${fmtNumber(shown)}, newest first`
      + (newer > 0 ? ` · ${fmtNumber(newer)} newer since opened` : '')
    : '';
  $('#records-pager').hidden = shown === 0;
  $('#records-newer').disabled = records.offset === 0;
  $('#records-older').disabled = records.offset + RECORDS_PAGE >= shown;
  $('#records-newest').disabled = records.offset === 0 && newer <= 0;
}

function recordItem(record) {
  const origin = record.origin && typeof record.origin === 'object'
    ? Object.entries(record.origin).map(([name, value]) => `${name} ${fmtValue(value)}`).join(', ')
    : 'no origin recorded';
  const key = record.key && typeof record.key === 'object'
    ? Object.entries(record.key).map(([name, value]) => `${name}=${fmtValue(value)}`).join(', ') : '';
  const line = typeof record.line === 'string' ? record.line : null;
  return h('li', {class: 'record-item', testid: 'record-item', dataset: {index: String(record.index), reason: String(record.reason ?? '')}},
    h('div', {class: 'record-head'},
      h('span', {class: 'record-reason', testid: 'record-reason'}, record.reason ?? 'unreadable record'),
      h('span', {class: 'record-origin', testid: 'record-origin'}, origin),
      h('span', {class: 'record-place'}, `#${record.index} · ${record.file}:${record.line_number}`)),
    record.event_time
      ? h('p', {class: 'record-times', testid: 'record-times'},
        `event time ${fmtTime(record.event_time)}, watermark ${fmtTime(record.watermark)}${key ? `, key ${key}` : ''}`)
      : null,
    record.unreadable ? h('p', {class: 'quarantine'}, record.unreadable) : null,
    line !== null ? h('pre', {class: 'record-line', testid: 'record-line'}, line) : null,
    record.line_truncated
      ? h('p', {class: 'record-cut', testid: 'record-cut'},
        `the first ${fmtNumber(line ? line.length : 0)} of ${fmtNumber(record.line_chars)} characters`)
      : null);
}

/* ---------- health ---------- */

let lastSeries = [];

export async function loadHealth() {
  let health;
  try {
    health = await api('GET', '/api/health');
  } catch (error) {
    $('#health-updated').textContent = `health unavailable: ${error.message}`;
    // A state shown from an earlier answer could be stale: say it is not known now.
    renderJob({state: 'unknown', reason: `the console could not read the job's state: ${error.message}`});
    return;
  }
  renderHealth(health || {});
}

// A job run with a rule file: the page shows its rules and offers no change (the API would answer 409).
function renderReadOnly(source) {
  document.body.classList.toggle('rules-read-only', Boolean(source));
  const note = $('#rules-read-only');
  note.textContent = source
    ? `Read-only: the job's rules come from its ${source}, which it reads once, at start. Edit the file and `
      + 'restart the job, or run it with a rule store to edit rules here. Validation and back-tests still work.'
    : '';
  note.hidden = !source;
}

// Lag per part of the source (a Kafka topic-partition, an input directory): where the job is and what waits.
function renderLagParts(parts) {
  const list = $('#health-lag-parts');
  list.replaceChildren(...parts.map((part) => {
    const figures = [part.records_behind === null || part.records_behind === undefined
      ? '? rec' : `${fmtNumber(part.records_behind)} rec`];
    if (part.event_time_behind_ms !== null && part.event_time_behind_ms !== undefined) {
      figures.push(fmtDuration(part.event_time_behind_ms));
    }
    if (part.position) figures.push(`at ${part.position}`);
    return h('li', {testid: 'health-lag-part', dataset: {part: String(part.part)}}, `${part.part}: ${figures.join(' · ')}`);
  }));
  list.hidden = parts.length === 0;
}

function setTile(id, text, warn) {
  const el = $(`#${id}`);
  el.textContent = text;
  el.classList.toggle('warn', Boolean(warn));
}

function renderHealth(health) {
  renderJob(health.job, health.last_batch_at);
  setTile('health-throughput', health.throughput_eps === undefined || health.throughput_eps === null ? '–' : `${fmtNumber(health.throughput_eps, 1)} ev/s`);
  setTile('health-watermark', health.watermark ? fmtTime(health.watermark) : 'none yet');
  setTile('health-lag', fmtSourceLag(health));
  renderLagParts(Array.isArray(health.source_lag) ? health.source_lag : []);
  renderReadOnly(health.rules_read_only || null);
  setTile('health-state', `${fmtBytes(health.state_bytes)}${health.state_keys !== undefined && health.state_keys !== null ? ` · ${fmtNumber(health.state_keys)} keys` : ''}`);
  setTile('health-batches', `${fmtNumber(health.batches)} / ${fmtNumber(health.events)}`);
  setTile('health-late', fmtNumber(health.late), Number(health.late) > 0);
  setTile('health-dead-letters', fmtNumber(health.dead_letters), Number(health.dead_letters) > 0);
  $('#health-updated').textContent = `updated ${new Date().toISOString().slice(11, 19)}Z`;

  const perRule = health.per_rule && typeof health.per_rule === 'object' ? Object.entries(health.per_rule) : [];
  const body = $('[data-testid="health-per-rule"] tbody');
  body.replaceChildren(...(perRule.length
    ? perRule.map(([id, m]) => {
      const errors = Array.isArray(m.errors) ? m.errors.length : Number(m.errors || 0);
      const trouble = errors > 0 || Number(m.dead_letters) > 0;
      return h('tr', {class: trouble ? 'has-trouble' : '', testid: 'health-rule', dataset: {ruleId: id}},
        h('td', {}, h('code', {}, id)), h('td', {}, fmtNumber(m.alerts)), h('td', {}, fmtNumber(m.late)),
        h('td', {}, fmtNumber(m.dead_letters)), h('td', {}, fmtNumber(m.duplicates || 0)),
        h('td', {}, fmtNumber(errors)));
    })
    : [h('tr', {}, h('td', {colspan: '6', class: 'muted'}, 'no batch metrics yet'))]));

  const quarantined = Array.isArray(health.quarantined) ? health.quarantined : [];
  $('#quarantined-list').replaceChildren(...(quarantined.length
    ? quarantined.map((q) => h('li', {class: 'q-item', testid: 'quarantined-rule', dataset: {ruleId: String(q.rule_id)}},
      h('code', {}, String(q.rule_id)), quarantineText(q)))
    : [h('li', {class: 'muted'}, 'none')]));

  lastSeries = Array.isArray(health.series) ? health.series : [];
  drawChart();
}

export function drawChart() {
  const canvas = $('#health-chart');
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(200, canvas.clientWidth);
  const height = Math.max(120, canvas.clientHeight);
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const pad = {left: 44, right: 36, top: 12, bottom: 22};
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#5f6b7a';
  const points = lastSeries
    .map((p) => ({t: parseTime(p.at), eps: Number(p.throughput_eps) || 0, alerts: Number(p.alerts) || 0, events: Number(p.events) || 0}))
    .filter((p) => p.t !== null)
    .sort((a, b) => a.t - b.t);
  canvas.dataset.points = String(points.length);
  if (!points.length) {
    ctx.textAlign = 'center';
    ctx.fillText('no batches yet', width / 2, height / 2);
    canvas.setAttribute('aria-label', 'Throughput and alerts over time: no batches yet');
    return;
  }
  const t0 = points[0].t;
  const t1 = Math.max(points[points.length - 1].t, t0 + 1000);
  const maxEps = niceMax(Math.max(...points.map((p) => p.eps)));
  const maxAlerts = niceMax(Math.max(...points.map((p) => p.alerts)));
  const x = (t) => pad.left + ((t - t0) / (t1 - t0)) * plotW;
  const yEps = (v) => pad.top + plotH - (v / maxEps) * plotH;
  const yAlerts = (v) => pad.top + plotH - (v / maxAlerts) * plotH;

  // grid and axes
  ctx.strokeStyle = '#e6eaf0';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let i = 0; i <= 4; i += 1) {
    const y = pad.top + (plotH * i) / 4;
    ctx.beginPath();
    ctx.moveTo(pad.left, Math.round(y) + 0.5);
    ctx.lineTo(pad.left + plotW, Math.round(y) + 0.5);
    ctx.stroke();
    ctx.fillStyle = '#2660d9';
    ctx.fillText(shortNumber(maxEps * (1 - i / 4)), pad.left - 6, y);
    ctx.fillStyle = '#c15a17';
    ctx.textAlign = 'left';
    ctx.fillText(shortNumber(maxAlerts * (1 - i / 4)), pad.left + plotW + 6, y);
    ctx.textAlign = 'right';
  }
  ctx.fillStyle = '#5f6b7a';
  ctx.textBaseline = 'top';
  ctx.textAlign = 'left';
  ctx.fillText(new Date(t0).toISOString().slice(11, 19), pad.left, pad.top + plotH + 6);
  ctx.textAlign = 'right';
  ctx.fillText(new Date(t1).toISOString().slice(11, 19), pad.left + plotW, pad.top + plotH + 6);

  // alerts: bars
  const barW = Math.max(2, Math.min(14, (plotW / Math.max(points.length, 1)) * 0.6));
  ctx.fillStyle = 'rgba(232, 119, 46, 0.75)';
  for (const p of points) {
    if (!p.alerts) continue;
    const top = yAlerts(p.alerts);
    ctx.fillRect(x(p.t) - barW / 2, top, barW, pad.top + plotH - top);
  }

  // throughput: filled line
  ctx.beginPath();
  points.forEach((p, i) => (i ? ctx.lineTo(x(p.t), yEps(p.eps)) : ctx.moveTo(x(p.t), yEps(p.eps))));
  ctx.strokeStyle = '#2660d9';
  ctx.lineWidth = 2;
  ctx.stroke();
  ctx.lineTo(x(points[points.length - 1].t), pad.top + plotH);
  ctx.lineTo(x(points[0].t), pad.top + plotH);
  ctx.closePath();
  ctx.fillStyle = 'rgba(38, 96, 217, 0.10)';
  ctx.fill();
  if (points.length === 1) {
    ctx.fillStyle = '#2660d9';
    ctx.beginPath();
    ctx.arc(x(points[0].t), yEps(points[0].eps), 3, 0, Math.PI * 2);
    ctx.fill();
  }
  const last = points[points.length - 1];
  const totalAlerts = points.reduce((sum, p) => sum + p.alerts, 0);
  canvas.setAttribute('aria-label', `Throughput and alerts over time: ${points.length} batches, `
    + `latest ${fmtNumber(last.eps, 1)} events/s, ${fmtNumber(totalAlerts)} alerts in the period`);
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function shortNumber(value) {
  if (value >= 1e6) return `${+(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${+(value / 1e3).toFixed(1)}k`;
  return `${+value.toFixed(value < 10 ? 1 : 0)}`;
}
