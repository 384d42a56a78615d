/* Talking to the console's API: the token (kept per tab), fetch with it, the refusals' wording, and the live
 * stream over fetch (EventSource cannot send the Authorization header).
 */
import {$, notify} from './dom.js';
import {normalizeErrors} from './paths.js';

const TOKEN_KEY = 'sparkcep.console.token';

export const auth = {
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

// What loads the page's data again once a token is given after a refusal (set by main.js: the panels' loaders).
let reloadPanels = () => {};

export function whenTokenGiven(reload) {
  reloadPanels = reload;
}

function reloadAfterToken() {
  readsRefused = false;
  $('#token-prompt').hidden = true;
  reloadPanels();
}

export function takeTokenFromFragment() {
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

export function renderToken() {
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

export function failureText(data) {
  if (data && typeof data === 'object') {
    if (typeof data.detail === 'string') return data.detail;
    if (typeof data.message === 'string') return data.message;
    if (typeof data.error === 'string') return data.error;
    const errors = normalizeErrors(data);
    if (errors.length) return errors.map((e) => `${e.field || 'rule'}: ${e.message}`).join('; ');
  }
  return typeof data === 'string' ? data.slice(0, 400) : '';
}

export async function api(method, path, body) {
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
export class AuthorizedEventSource {
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

export function showFailure(what, error) {
  notify('error', `${what}: ${error.message}`, error.status);
}
