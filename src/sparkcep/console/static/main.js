/* sparkcep operations console: plain JavaScript modules, no build step, no external resources.
 *
 * Everything the server sends is data: it is put in the page with textContent, never as HTML. This module wires
 * the page's controls to the panels (rules, editor, back-test, alerts, health) and starts polling; index.html
 * loads it with <script type="module">, and it imports the rest.
 */
import {applyFilters, connectAlerts, held, pauseAlerts, resumeAlerts, seenAlerts, updateAlertCount} from './alerts.js';
import {runBacktest} from './backtest.js';
import {$, notify} from './dom.js';
import {AUTHOR_KEY, clearValidation, createRule, editing, refreshEditorDecorations, saveVersion, setDraft, stopEditing, syncScroll, textarea, validateDraft} from './editor.js';
import {drawChart, loadHealth, openRecords, records, RECORDS_PAGE} from './health.js';
import {fmtBytes, fmtDuration} from './format.js';
import {auth, renderToken, takeTokenFromFragment, whenTokenGiven} from './http.js';
import {locatePaths, normalizeErrors, splitPath} from './paths.js';
import {filterRules, loadRules} from './rules.js';
import {loadRuleTypes} from './ruletypes.js';

const POLL_MS = 2000;

function poll(work, ms) {
  let running = false;
  const tick = async () => {
    if (running || document.hidden) return;
    running = true;
    try { await work(); } finally { running = false; }
  };
  tick();
  return setInterval(tick, ms);
}

function init() {
  whenTokenGiven(() => {
    loadRules();
    loadHealth();
    connectAlerts();
  });
  takeTokenFromFragment();
  renderToken();
  try { $('#author').value = localStorage.getItem(AUTHOR_KEY) || ''; } catch { /* none */ }

  $('#token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('#token-input').value.trim();
    if (!token) return;
    auth.set(token);
    $('#token-input').value = '';
    notify('ok', 'token kept for this tab');
  });
  $('#token-forget').addEventListener('click', () => auth.set(''));
  $('.notice-close').addEventListener('click', () => { $('#notice').hidden = true; });

  $('#rules-refresh').addEventListener('click', loadRules);
  $('#rules-filter').addEventListener('input', (event) => {
    filterRules(event.target.value);
  });

  loadRuleTypes((template) => {
    if (editing.id) stopEditing();
    setDraft(template);
  }).then(refreshEditorDecorations); // the hints of a draft written meanwhile gain their help
  $('#editor-clear').addEventListener('click', () => {
    if (editing.id) stopEditing();
    textarea().value = '';
    clearValidation();
  });
  const ta = textarea();
  ta.addEventListener('input', refreshEditorDecorations);
  ta.addEventListener('scroll', syncScroll);
  ta.addEventListener('keydown', (event) => {
    if (event.key === 'Tab' && !event.shiftKey && !event.ctrlKey && !event.altKey) {
      // Indent instead of leaving the editor; Escape then Tab leaves it.
      if (ta.dataset.escaped === 'true') return;
      event.preventDefault();
      ta.setRangeText('  ', ta.selectionStart, ta.selectionEnd, 'end');
      refreshEditorDecorations();
    }
    ta.dataset.escaped = String(event.key === 'Escape');
    if ((event.ctrlKey || event.metaKey) && event.key === 'Enter') {
      event.preventDefault();
      validateDraft();
    }
  });
  new ResizeObserver(syncScroll).observe(ta);

  $('#validate').addEventListener('click', validateDraft);
  $('#create').addEventListener('click', createRule);
  $('#save-version').addEventListener('click', saveVersion);
  $('#cancel-edit').addEventListener('click', stopEditing);
  $('#backtest-run').addEventListener('click', runBacktest);

  $('#alert-filters').addEventListener('submit', (event) => {
    event.preventDefault();
    applyFilters();
  });
  for (const input of [$('#filter-rule'), $('#filter-key')]) {
    input.addEventListener('change', applyFilters);
  }
  $('#alerts-clear').addEventListener('click', () => {
    $('#alerts-list').replaceChildren();
    seenAlerts.clear();
    updateAlertCount();
  });
  $('#alerts-pause').addEventListener('click', () => (held.on ? resumeAlerts() : pauseAlerts()));

  for (const button of document.querySelectorAll('[data-records]')) {
    button.addEventListener('click', () => {
      openRecords(button.dataset.records);
      if (button.classList.contains('tile-open')) $('#records-panel').scrollIntoView({block: 'start'});
    });
  }
  $('#records-newest').addEventListener('click', () => openRecords(records.kind));
  $('#records-newer').addEventListener('click', () => {
    openRecords(records.kind, Math.max(records.offset - RECORDS_PAGE, 0), records.before);
  });
  $('#records-older').addEventListener('click', () => {
    openRecords(records.kind, records.offset + RECORDS_PAGE, records.before);
  });

  window.addEventListener('resize', drawChart);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) {
      loadRules();
      loadHealth();
    }
  });

  refreshEditorDecorations();
  poll(loadRules, POLL_MS);
  poll(loadHealth, POLL_MS);
  connectAlerts();
}

// For tests and the curious: the pure helpers, no state.
window.sparkcepConsole = {locatePaths, splitPath, normalizeErrors, fmtDuration, fmtBytes};

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
