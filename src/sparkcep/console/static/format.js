/* How values read: times, durations, sizes, numbers, JSON values, alert keys. Pure functions. */
export function parseTime(value) {
  if (value === null || value === undefined || value === '') return null;
  if (typeof value === 'number') return value;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

export function fmtTime(value) {
  const ms = parseTime(value);
  if (ms === null) return value ? String(value) : '–';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.000Z$/, 'Z');
}

export function fmtEffective(value) {
  return parseTime(value) === 0 ? 'the start of the stream (1970-01-01 00:00:00Z)' : fmtTime(value);
}

// How far the job is behind its input (records and event time); the watermark's distance from the wall clock
// says nothing for historical data, so it is only the fallback of a job that reports no source lag.
export function fmtSourceLag(health) {
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

export function fmtDuration(ms) {
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

export function fmtBytes(bytes) {
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

export function fmtNumber(value, digits = 0) {
  if (value === null || value === undefined || value === '') return '–';
  const n = Number(value);
  if (Number.isNaN(n)) return String(value);
  return n.toLocaleString('en-US', {maximumFractionDigits: digits, minimumFractionDigits: 0});
}

export function fmtValue(value) {
  if (value === undefined) return '(absent)';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** The alert's key: the server's key_text also covers completion and inactivity events (a plain key field). */
export function fmtKey(alert) {
  if (alert.key_text) return alert.key_text.split(',').join(', ');
  const key = alert.key;
  if (key === null || key === undefined) return '';
  if (typeof key !== 'object') return String(key);
  return Object.entries(key).map(([k, v]) => `${k}=${fmtValue(v)}`).join(', ');
}

export const normState = (state) => (state === 'PAUSE' ? 'PAUSED' : state);
