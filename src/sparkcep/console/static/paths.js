/* Error paths in a rule ("pattern.stages[1].where"): the API's error shapes made one, and where each path's value
 * is in the editor's JSON text. Pure functions (the page's tests reach them through window.sparkcepConsole).
 */
import {fmtValue} from './format.js';

export function lineOf(text, offset) {
  return text.slice(0, offset).split('\n').length;
}

/** Normalise the error shapes the API may send into [{field, expected, got, message}]. */
export function normalizeErrors(data) {
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

export function normalizeError(e) {
  if (typeof e === 'string') return {field: '', message: e};
  const field = e.field === undefined || e.field === null ? '' : String(e.field);
  let message = e.message || e.msg || '';
  if (!message && (e.expected !== undefined || e.got !== undefined)) {
    message = `expected ${fmtValue(e.expected)}, got ${fmtValue(e.got)}`;
  }
  return {field, expected: e.expected, got: e.got, message: message || 'invalid'};
}

export function pathFromParts(parts) {
  let path = '';
  for (const part of parts) {
    if (typeof part === 'number') path += `[${part}]`;
    else path += path ? `.${part}` : String(part);
  }
  return path;
}

export function splitPath(field) {
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
export function locatePaths(text) {
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
