/* The back-test: the draft evaluated over history, and what it would change against the rule it replaces. */
import {alertItem} from './alerts.js';
import {$, h} from './dom.js';
import {readDraft, showErrors, withBusy} from './editor.js';
import {fmtNumber, fmtTime} from './format.js';
import {api} from './http.js';
import {normalizeErrors} from './paths.js';

function timeInput(value) {
  const text = value.trim();
  if (!text) return null;
  return /^\d+$/.test(text) ? Number(text) : text;
}

export async function runBacktest() {
  const rule = readDraft();
  if (rule === undefined) return;
  const box = $('#backtest-result');
  await withBusy($('#backtest-run'), async () => {
    box.hidden = false;
    box.dataset.state = 'running';
    box.replaceChildren(h('p', {class: 'muted'}, 'running the draft over the history…'));
    try {
      const result = await api('POST', '/api/backtest', {
        rule, since: timeInput($('#backtest-since').value), until: timeInput($('#backtest-until').value),
      });
      box.dataset.state = 'done';
      renderBacktest(result || {});
    } catch (error) {
      box.dataset.state = 'failed';
      if (error.status === 422) {
        const errors = normalizeErrors(error.body);
        if (errors.length) showErrors(errors);
      }
      box.replaceChildren(h('p', {class: 'quarantine'}, `back-test failed: ${error.message}`));
    }
  });
}

function renderBacktest(result) {
  const box = $('#backtest-result');
  const byType = result.by_type && typeof result.by_type === 'object' ? Object.entries(result.by_type) : [];
  const sample = Array.isArray(result.sample) ? result.sample : [];
  box.replaceChildren(
    h('p', {class: 'backtest-headline'},
      'It would have raised ', h('strong', {testid: 'backtest-alerts'}, fmtNumber(result.alerts)),
      ` alert${result.alerts === 1 ? '' : 's'} over ${fmtNumber(result.events)} events `,
      h('span', {testid: 'backtest-range'},
        `from ${result.since ? fmtTime(result.since) : 'the start'} to ${result.until ? fmtTime(result.until) : 'the end'}`),
      h('span', {class: 'muted small'},
        ` (late ${fmtNumber(result.late)}, dead letters ${fmtNumber(result.dead_letters)}, `
        + `${fmtNumber(result.seconds, 2)} s)`)),
    byType.length
      ? h('table', {class: 'by-type', testid: 'backtest-by-type'},
        h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'alert type'), h('th', {scope: 'col'}, 'count'))),
        h('tbody', {}, byType.map(([type, count]) => h('tr', {}, h('td', {}, type), h('td', {}, fmtNumber(count))))))
      : null,
    comparisonView(result.comparison),
    sample.length ? h('h3', {}, `Sample (${sample.length})`) : null,
    sample.length ? h('ol', {class: 'alerts-list', testid: 'backtest-sample'}, sample.map((a) => alertItem(a, false, 'sample-alert'))) : null);
}

/** The draft against the rule's current version: counts, then the first added and removed alerts. */
function comparisonView(c) {
  if (!c || typeof c !== 'object') return null;
  const hasCurrent = c.current_version !== null && c.current_version !== undefined;
  let against = 'a new rule (no current version): every alert is added';
  if (hasCurrent) {
    against = `against the current version v${c.current_version}`;
    against += c.current_state === 'ACTIVE'
      ? ` (${fmtNumber(c.current_alerts)} alert${c.current_alerts === 1 ? '' : 's'})`
      : ` (${c.current_state}: it raises nothing now)`;
  }
  const listOf = (alerts, total, testid, title) => {
    const items = Array.isArray(alerts) ? alerts : [];
    if (!items.length) return [];
    const shown = items.length < total ? `the first ${items.length} of ${fmtNumber(total)}` : fmtNumber(total);
    return [h('h3', {}, `${title} (${shown})`),
      h('ol', {class: 'alerts-list', testid: `${testid}-list`}, items.map((a) => alertItem(a, false, `${testid}-alert`)))];
  };
  return h('div', {class: 'backtest-diff', testid: 'backtest-diff'},
    h('p', {class: 'diff-headline'},
      h('span', {class: 'diff-added', testid: 'backtest-added', dataset: {count: String(c.added)}}, `+${fmtNumber(c.added)} added`),
      ' · ',
      h('span', {class: 'diff-removed', testid: 'backtest-removed', dataset: {count: String(c.removed)}}, `−${fmtNumber(c.removed)} removed`),
      ' · ',
      h('span', {class: 'diff-unchanged', testid: 'backtest-unchanged', dataset: {count: String(c.unchanged)}}, `${fmtNumber(c.unchanged)} unchanged`),
      h('span', {class: 'muted small', testid: 'backtest-against'}, ` ${against}; the same alert has the same event id`)),
    ...listOf(c.added_alerts, c.added, 'added', 'Added'),
    ...listOf(c.removed_alerts, c.removed, 'removed', 'Removed'));
}
