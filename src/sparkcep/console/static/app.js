/* sparkcep operations console: plain JavaScript, no build step, no external resources.
 *
 * Everything the server sends is data: it is put in the page with textContent, never as HTML.
 */
'use strict';

(() => {
  const TOKEN_KEY = 'sparkcep.console.token';
  const AUTHOR_KEY = 'sparkcep.console.author';
  const POLL_MS = 2000;
  const MAX_ALERTS = 200;
  const INITIAL_ALERTS = 50;
  const META_FIELDS = ['version', 'state', 'effective_from', 'effective_from_ms'];

  // Templates taken from examples/fraud.rules.json and examples/patterns.rules.json.
  const TEMPLATES = {
    aggregate: {
      type: 'aggregate',
      id: 'large-wire-beneficiary',
      group_by: ['beneficiaryId'],
      function: 'AVG',
      field: 'paymentAmount',
      operator: '>',
      limit: '20000',
      window: '30m',
      filter: "paymentType in ('WIRE', 'INSTANT')",
      output_event: 'WIRE_ALERT',
    },
    pattern: {
      type: 'pattern',
      id: 'small-then-large',
      key: ['card_id'],
      event_types: ['PAYMENT'],
      pattern: {
        stages: [
          {name: 'small', where: 'amount < 5'},
          {name: 'large', contiguity: 'followed_by', where: 'amount > 100 * last(small).amount'},
        ],
        within: '10m',
        skip: 'SKIP_PAST_LAST_EVENT',
      },
      output: {
        event_type: 'SMALL_THEN_LARGE',
        timeout_event_type: 'SMALL_NOT_FOLLOWED',
        measures: {small: 'first(small).amount', large: 'first(large).amount'},
      },
    },
  };

  // What each top-level field means, shown next to the editor.
  const FIELD_HELP = {
    type: 'aggregate or pattern (also completion, inactivity)',
    id: 'unique name of the rule; cannot change between versions',
    group_by: 'fields whose values make the key of each window',
    function: 'SUM, AVG, MIN, MAX or COUNT',
    field: 'the numeric field aggregated (not for COUNT)',
    operator: 'comparison with the limit: > >= < <= = !=',
    limit: 'the threshold (exact decimal)',
    window: 'sliding window length, e.g. 30m, 24h',
    filter: 'expression an event must satisfy to count',
    event_types: 'event types the rule reads (default: all)',
    output_event: 'event type of the alerts',
    resolution: 'window resolution (bucketing), e.g. 1s',
    clear_state: 'start this version with empty windows',
    key: 'fields whose values partition the matches',
    pattern: 'stages (name, where, contiguity, times…), within, skip',
    sql: 'a MATCH_RECOGNIZE query instead of key, pattern and measures',
    pattern_options: 'with sql: max_partial_matches or unbounded',
    output: 'event_type, timeout_event_type and measures',
    on_new_version: 'drop or finish partial matches on a new version',
    version: 'set by the store',
    state: 'set by the store (pause/resume)',
    effective_from: 'set by the job on its next micro-batch',
    ruleId: 'Flink demo form: numeric id',
    groupingKeyNames: 'Flink demo form: key fields',
    aggregateFieldName: 'Flink demo form: aggregated field',
    aggregatorFunctionType: 'Flink demo form: SUM, AVG, MIN, MAX',
    limitOperatorType: 'Flink demo form: GREATER, LESS…',
    windowMinutes: 'Flink demo form: window in minutes',
    ruleState: 'Flink demo form: ACTIVE, PAUSE, DELETE',
  };
  const REQUIRED = {
    aggregate: ['type', 'id', 'group_by', 'function', 'operator', 'limit', 'window'],
    pattern: ['type', 'id', 'key', 'pattern'],
  };

  /* ---------- small helpers ---------- */

  const $ = (selector, root = document) => root.querySelector(selector);

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'class') el.className = value;
      else if (name === 'text') el.textContent = String(value);
      else if (name === 'testid') el.dataset.testid = value;
      else if (name === 'dataset') Object.assign(el.dataset, value);
      else if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const enc = encodeURIComponent;

  function parseTime(value) {
    if (value === null || value === undefined || value === '') return null;
    if (typeof value === 'number') return value;
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms;
  }

  function fmtTime(value) {
    const ms = parseTime(value);
    if (ms === null) return value ? String(value) : '–';
    return new Date(ms).toISOString().replace('T', ' ').replace(/\.000Z$/, 'Z');
  }

  function fmtEffective(value) {
    return parseTime(value) === 0 ? 'the start of the stream (1970-01-01 00:00:00Z)' : fmtTime(value);
  }

  // How far the job is behind its input (records and event time); the watermark's distance from the wall clock
  // says nothing for historical data, so it is only the fallback of a job that reports no source lag.
  function fmtSourceLag(health) {
    const records = health.lag_records;
    const time = health.lag_event_time_ms;
    if ((records === null || records === undefined) && (time === null || time === undefined)) {
      return health.watermark_lag_ms === null || health.watermark_lag_ms === undefined
        ? '–' : `watermark ${fmtDuration(health.watermark_lag_ms)} behind now`;
    }
    const parts = [];
    if (records !== null && records !== undefined) parts.push(`${fmtNumber(records)} rec`);
    if (time !== null && time !== undefined) parts.push(fmtDuration(time));
    return parts.join(' · ');
  }

  function fmtDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
    const sign = ms < 0 ? '−' : '';
    let rest = Math.abs(ms);
    if (rest < 1000) return `${sign}${Math.round(rest)} ms`;
    const units = [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000]];
    const parts = [];
    for (const [name, size] of units) {
      if (rest >= size) {
        parts.push(`${Math.floor(rest / size)}${name}`);
        rest %= size;
      }
      if (parts.length === 2) break;
    }
    return sign + parts.join(' ');
  }

  function fmtBytes(bytes) {
    if (bytes === null || bytes === undefined) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = Number(bytes);
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
  }

  function fmtNumber(value, digits = 0) {
    if (value === null || value === undefined || value === '') return '–';
    const n = Number(value);
    if (Number.isNaN(n)) return String(value);
    return n.toLocaleString('en-US', {maximumFractionDigits: digits, minimumFractionDigits: 0});
  }

  function fmtValue(value) {
    if (value === undefined) return '(absent)';
    if (typeof value === 'string') return value;
    return JSON.stringify(value);
  }

  /** The alert's key: the server's key_text also covers completion and inactivity events (a plain key field). */
  function fmtKey(alert) {
    if (alert.key_text) return alert.key_text.split(',').join(', ');
    const key = alert.key;
    if (key === null || key === undefined) return '';
    if (typeof key !== 'object') return String(key);
    return Object.entries(key).map(([k, v]) => `${k}=${fmtValue(v)}`).join(', ');
  }

  const normState = (state) => (state === 'PAUSE' ? 'PAUSED' : state);

  /* ---------- notices ---------- */

  let noticeTimer = null;

  function notify(kind, text, status) {
    const box = $('#notice');
    box.className = `notice ${kind}`;
    box.dataset.kind = kind;
    if (status !== undefined) box.dataset.status = String(status);
    else delete box.dataset.status;
    $('.notice-text', box).textContent = text;
    box.hidden = false;
    clearTimeout(noticeTimer);
    if (kind !== 'error') noticeTimer = setTimeout(() => { box.hidden = true; }, 8000);
  }

  /* ---------- token ---------- */

  const auth = {
    get() {
      try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
    },
    set(token) {
      try {
        if (token) sessionStorage.setItem(TOKEN_KEY, token);
        else sessionStorage.removeItem(TOKEN_KEY);
      } catch { /* storage disabled: the token lives as long as the page */ }
      renderToken();
      if (token && readsRefused) reloadAfterToken();
    },
  };

  // A read came back 401/403: the page shows nothing until a token is given, then loads everything again.
  let readsRefused = false;

  function reloadAfterToken() {
    readsRefused = false;
    $('#token-prompt').hidden = true;
    loadRules();
    loadHealth();
    connectAlerts();
  }

  function takeTokenFromFragment() {
    const fragment = location.hash.replace(/^#/, '');
    if (!fragment) return;
    const params = new URLSearchParams(fragment);
    if (!params.has('token')) return;
    const token = params.get('token');
    params.delete('token');
    const rest = params.toString();
    // Out of the address bar, the history and any bookmark before anything else runs.
    history.replaceState(history.state, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
    if (token) auth.set(token);
  }

  function renderToken() {
    const has = Boolean(auth.get());
    $('#token-form').hidden = has;
    $('#token-status').hidden = !has;
    $('.token-area').classList.toggle('needs-token', false);
  }

  function tokenProblem(status, read = false) {
    const area = $('.token-area');
    if (read) {
      readsRefused = true;
      $('#token-prompt').hidden = false;
      $('.token-prompt-text').textContent = status === 401
        ? 'This console shows rules, alerts and health only with its token. Paste the token `sparkcep console` '
          + 'printed at start into the Token field above, or open the URL it printed (the one ending in #token=…).'
        : 'The token was rejected. Paste the one `sparkcep console` printed at start (a restarted console '
          + 'prints a new one unless its token comes from an environment variable).';
    }
    if (status === 401) {
      area.classList.add('needs-token');
      $('#token-form').hidden = false;
      $('#token-status').hidden = true;
      if (!read || document.activeElement === document.body) $('#token-input').focus();
      return '401 Unauthorized: the console needs its token. Paste the token the console printed at start '
        + '(or open the URL with #token=…).';
    }
    area.classList.add('needs-token');
    $('#token-form').hidden = false;
    return '403 Forbidden: the token was rejected. Paste the right one.';
  }

  /* ---------- HTTP ---------- */

  class ApiError extends Error {
    constructor(status, body, message) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  function setConnection(up) {
    const el = $('.connection');
    el.classList.toggle('is-up', up);
    el.classList.toggle('is-down', !up);
    $('.connection-text', el).textContent = up ? 'console reachable' : 'console unreachable';
  }

  function failureText(data) {
    if (data && typeof data === 'object') {
      if (typeof data.detail === 'string') return data.detail;
      if (typeof data.message === 'string') return data.message;
      if (typeof data.error === 'string') return data.error;
      const errors = normalizeErrors(data);
      if (errors.length) return errors.map((e) => `${e.field || 'rule'}: ${e.message}`).join('; ');
    }
    return typeof data === 'string' ? data.slice(0, 400) : '';
  }

  async function api(method, path, body) {
    const headers = {Accept: 'application/json'};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    // Reads too: the console answers them only with the token unless it runs with --public-read.
    const token = auth.get();
    if (token) headers.Authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch(path, {
        method, headers, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      setConnection(false);
      throw new ApiError(0, null, `the console did not answer (${error.message})`);
    }
    setConnection(true);
    const text = await response.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = text; }
    }
    if (!response.ok) {
      let message;
      const refused = response.status === 401 || response.status === 403;
      if (refused && token !== auth.get()) {
        // A refusal of the token the user has just replaced: not worth a prompt.
        message = `${response.status}: sent with a token since replaced; the next attempt uses the new one`;
      } else if (refused) {
        message = tokenProblem(response.status, method === 'GET' || method === 'HEAD');
      } else {
        message = `${response.status} ${response.statusText}${failureText(data) ? `: ${failureText(data)}` : ''}`;
      }
      throw new ApiError(response.status, data, message);
    }
    return data;
  }

  /**
   * The live stream over fetch(), with EventSource's interface (readyState, onopen, onerror, onmessage,
   * addEventListener, close): EventSource cannot send the Authorization header, and a token in the URL would end
   * up in server and proxy logs. Like EventSource it reconnects after a network failure or the end of the stream
   * (after the server's `retry:` delay) and gives up on a refusal (any answer but 200).
   */
  class AuthorizedEventSource {
    static CONNECTING = 0;
    static OPEN = 1;
    static CLOSED = 2;

    constructor(url) {
      this.url = url;
      this.readyState = AuthorizedEventSource.CONNECTING;
      this.onopen = null;
      this.onerror = null;
      this.onmessage = null;
      this.listeners = {};
      this.retryMs = 2000;
      this.lastEventId = '';
      this.controller = null;
      this.timer = null;
      this.connect();
    }

    addEventListener(type, listener) {
      (this.listeners[type] = this.listeners[type] || []).push(listener);
    }

    close() {
      this.readyState = AuthorizedEventSource.CLOSED;
      clearTimeout(this.timer);
      if (this.controller) this.controller.abort();
    }

    emit(type, event) {
      const handler = this[`on${type}`];
      if (typeof handler === 'function') handler.call(this, event);
      for (const listener of this.listeners[type] || []) listener.call(this, event);
    }

    async connect() {
      if (this.readyState === AuthorizedEventSource.CLOSED) return;
      this.controller = new AbortController();
      const headers = {Accept: 'text/event-stream'};
      const token = auth.get();
      if (token) headers.Authorization = `Bearer ${token}`;
      if (this.lastEventId) headers['Last-Event-ID'] = this.lastEventId;
      try {
        const response = await fetch(this.url, {headers, cache: 'no-store', signal: this.controller.signal});
        if (!response.ok || !response.body) {
          const current = token === auth.get(); // not a refusal of a token given meanwhile
          if ((response.status === 401 || response.status === 403) && current) tokenProblem(response.status, true);
          this.readyState = AuthorizedEventSource.CLOSED;
          this.emit('error', new Event('error'));
          return;
        }
        this.readyState = AuthorizedEventSource.OPEN;
        this.emit('open', new Event('open'));
        await this.read(response.body.getReader());
      } catch { /* the network failed, or close() aborted the request */ }
      if (this.readyState === AuthorizedEventSource.CLOSED) return;
      this.readyState = AuthorizedEventSource.CONNECTING;
      this.emit('error', new Event('error'));
      this.timer = setTimeout(() => this.connect(), this.retryMs);
    }

    async read(reader) {
      const decoder = new TextDecoder();
      let buffer = '';
      let data = [];
      let type = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, {stream: true});
        const lines = buffer.split(/\r?\n/);
        buffer = lines.pop();
        for (const line of lines) {
          if (line === '') { // a blank line ends an event
            if (data.length) {
              const name = type || 'message';
              this.emit(name, new MessageEvent(name, {data: data.join('\n'), lastEventId: this.lastEventId}));
            }
            data = [];
            type = '';
            continue;
          }
          if (line.startsWith(':')) continue; // a comment: connected, keep-alive
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let text = colon < 0 ? '' : line.slice(colon + 1);
          if (text.startsWith(' ')) text = text.slice(1);
          if (field === 'data') data.push(text);
          else if (field === 'event') type = text;
          else if (field === 'id') this.lastEventId = text;
          else if (field === 'retry' && /^\d+$/.test(text)) this.retryMs = Number(text);
        }
      }
    }
  }

  function showFailure(what, error) {
    notify('error', `${what}: ${error.message}`, error.status);
  }

  /* ---------- rules panel ---------- */

  const cards = new Map(); // id -> {el, sig, rule}
  const expandedHistory = new Set();
  let rulesFilter = '';
  let lastRules = [];

  async function loadRules() {
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

  function matchesFilter(rule) {
    if (!rulesFilter) return true;
    const text = [rule.id, rule.type, rule.state, ...badgesOf(rule), rule.sentence].join(' ').toLowerCase();
    return rulesFilter.split(/\s+/).every((word) => text.includes(word));
  }

  function renderRules(rules) {
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
  function quarantineText(q) {
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

  /* ---------- editor ---------- */

  const editing = {id: null, version: null};
  let currentErrors = [];

  const textarea = () => $('#editor');

  function setDraft(rule) {
    textarea().value = JSON.stringify(rule, null, 2);
    clearValidation();
    refreshEditorDecorations();
  }

  function startEditing(rule) {
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

  function stopEditing() {
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
  function readDraft() {
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

  function lineOf(text, offset) {
    return text.slice(0, offset).split('\n').length;
  }

  /** Normalise the error shapes the API may send into [{field, expected, got, message}]. */
  function normalizeErrors(data) {
    if (!data || typeof data !== 'object') return [];
    if (Array.isArray(data.errors)) return data.errors.map(normalizeError);
    if (Array.isArray(data.detail)) {
      // FastAPI's own request validation: loc is ["body", "rule", ...].
      return data.detail.map((d) => {
        const loc = Array.isArray(d.loc) ? [...d.loc] : [];
        if (loc[0] === 'body') loc.shift();
        if (loc[0] === 'rule') loc.shift();
        return normalizeError({field: pathFromParts(loc), message: d.msg, expected: d.type, got: d.input});
      });
    }
    if (data.detail && typeof data.detail === 'object' && Array.isArray(data.detail.errors)) {
      return data.detail.errors.map(normalizeError);
    }
    return [];
  }

  function normalizeError(e) {
    if (typeof e === 'string') return {field: '', message: e};
    const field = e.field === undefined || e.field === null ? '' : String(e.field);
    let message = e.message || e.msg || '';
    if (!message && (e.expected !== undefined || e.got !== undefined)) {
      message = `expected ${fmtValue(e.expected)}, got ${fmtValue(e.got)}`;
    }
    return {field, expected: e.expected, got: e.got, message: message || 'invalid'};
  }

  function pathFromParts(parts) {
    let path = '';
    for (const part of parts) {
      if (typeof part === 'number') path += `[${part}]`;
      else path += path ? `.${part}` : String(part);
    }
    return path;
  }

  function splitPath(field) {
    const parts = [];
    if (!field || field.startsWith('<')) return parts; // "<rule>", "<body>": the whole rule
    const re = /([^.[\]]+)|\[(\d+)\]/g;
    let m;
    while ((m = re.exec(field)) !== null) parts.push(m[2] !== undefined ? Number(m[2]) : m[1]);
    return parts;
  }

  /**
   * Where each value of a JSON text is: path ("pattern.stages[1].where") -> {start, end, keyStart}.
   * Lenient: stops at the first syntax error and keeps what it found.
   */
  function locatePaths(text) {
    const found = new Map();
    let i = 0;
    const space = () => { while (i < text.length && /\s/.test(text[i])) i += 1; };
    const fail = () => { throw new Error('syntax'); };
    const string = () => {
      const start = i;
      i += 1;
      while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      if (i >= text.length) fail();
      i += 1;
      try { return JSON.parse(text.slice(start, i)); } catch { return text.slice(start + 1, i - 1); }
    };
    const value = (path, keyStart) => {
      space();
      const start = i;
      const c = text[i];
      if (c === '{') {
        i += 1;
        space();
        if (text[i] === '}') i += 1;
        else {
          for (;;) {
            space();
            if (text[i] !== '"') fail();
            const ks = i;
            const key = string();
            space();
            if (text[i] !== ':') fail();
            i += 1;
            value(path ? `${path}.${key}` : key, ks);
            space();
            if (text[i] === ',') { i += 1; continue; }
            if (text[i] === '}') { i += 1; break; }
            fail();
          }
        }
      } else if (c === '[') {
        i += 1;
        space();
        if (text[i] === ']') i += 1;
        else {
          for (let n = 0; ; n += 1) {
            value(`${path}[${n}]`, null);
            space();
            if (text[i] === ',') { i += 1; continue; }
            if (text[i] === ']') { i += 1; break; }
            fail();
          }
        }
      } else if (c === '"') {
        string();
      } else {
        while (i < text.length && !/[\s,\]}]/.test(text[i])) i += 1;
        if (i === start) fail();
      }
      found.set(path, {start, end: i, keyStart: keyStart === null || keyStart === undefined ? start : keyStart});
    };
    try {
      value('', null);
      space();
      if (i < text.length) fail();
    } catch {
      found.failedAt = Math.min(i, Math.max(text.length - 1, 0)); // where the text stops being JSON
    }
    return found;
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

  function refreshEditorDecorations() {
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

  function syncScroll() {
    const backdrop = $('.editor-backdrop');
    backdrop.scrollTop = textarea().scrollTop;
    backdrop.scrollLeft = textarea().scrollLeft;
  }

  function renderHints(text) {
    let draft = null;
    try { draft = JSON.parse(text); } catch { /* fall back to the errors only */ }
    const fields = [];
    if (draft && typeof draft === 'object' && !Array.isArray(draft)) fields.push(...Object.keys(draft));
    // A pattern written as MATCH_RECOGNIZE derives key and pattern from its query.
    const required = (draft && (draft.type === 'pattern' && draft.sql ? ['type', 'id', 'sql'] : REQUIRED[draft.type])) || [];
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
        : (missing ? `missing — ${FIELD_HELP[field] || 'required'}` : FIELD_HELP[field] || '');
      return h('li', {
        class: `field-hint${errors.length ? ' has-error' : ''}${missing ? ' missing' : ''}`, testid: 'field-hint',
        dataset: {field},
      }, h('code', {}, field), h('span', {class: 'what'}, what));
    });
    if (!items.length) items.push(h('li', {class: 'muted'}, 'pick a template or write a rule'));
    $('#field-hints-list').replaceChildren(...items);
  }

  function showErrors(errors) {
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

  function clearValidation() {
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

  async function withBusy(button, work) {
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try { return await work(); } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  async function validateDraft() {
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

  function createRule() {
    return writeRule($('#create'), 'Created', (rule) => api('POST', '/api/rules', {rule, author: authorField()}));
  }

  function saveVersion() {
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

  /* ---------- back-test ---------- */

  function timeInput(value) {
    const text = value.trim();
    if (!text) return null;
    return /^\d+$/.test(text) ? Number(text) : text;
  }

  async function runBacktest() {
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

  /* ---------- live alerts ---------- */

  let source = null;
  let streamGeneration = 0;
  const seenAlerts = new Set();

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

  function query(params) {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) if (value !== '' && value !== null && value !== undefined) search.set(name, value);
    const text = search.toString();
    return text ? `?${text}` : '';
  }

  let streamFilters = null;

  /** (Re)open the stream for the filters in the form; nothing to do when they did not change. */
  function applyFilters() {
    const wanted = JSON.stringify(filters());
    if (source && source.readyState !== EventSource.CLOSED && wanted === streamFilters) return;
    connectAlerts();
  }

  function connectAlerts() {
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
  const held = {on: false, alerts: [], ids: new Set()};

  function holdAlert(identity, alert, fresh) {
    if (held.ids.has(identity)) return;
    held.ids.add(identity);
    held.alerts.push([alert, fresh]);
    if (held.alerts.length > MAX_ALERTS) held.alerts.shift();
    updateHeld();
  }

  function pauseAlerts() {
    held.on = true;
    updateHeld();
  }

  /** Resume the list; ``show`` false drops what was held (the list was replaced). */
  function resumeAlerts(show = true) {
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

  function updateAlertCount() {
    const n = $('#alerts-list').children.length;
    $('[data-testid="alerts-count"]').textContent = n ? `(${n}${n >= MAX_ALERTS ? ', newest kept' : ''})` : '';
    $('#alerts-empty').hidden = n > 0;
  }

  let alertSerial = 0;

  function alertItem(alert, fresh, testid = 'alert-item') {
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

  const RECORDS_PAGE = 25;
  const RECORD_KINDS = {deadletter: 'dead letters', late: 'late records'};
  // before: the total when the list was opened, so paging through it holds still while the job writes more.
  const records = {kind: null, offset: 0, before: null, generation: 0};

  async function openRecords(kind, offset = 0, before = null) {
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

  async function loadHealth() {
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

  function drawChart() {
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

  /* ---------- wiring ---------- */

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
      rulesFilter = event.target.value.trim().toLowerCase();
      renderRules(lastRules);
    });

    for (const button of document.querySelectorAll('[data-template]')) {
      button.addEventListener('click', () => {
        if (editing.id) stopEditing();
        setDraft(TEMPLATES[button.dataset.template]);
      });
    }
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
})();
