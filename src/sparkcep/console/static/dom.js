/* Building the page: element lookup, element creation (text only, never HTML) and the notice line. */
export const $ = (selector, root = document) => root.querySelector(selector);

export function h(tag, props, ...children) {
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

export const enc = encodeURIComponent;
/* ---------- notices ---------- */

let noticeTimer = null;

export function notify(kind, text, status) {
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
