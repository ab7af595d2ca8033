// Small DOM helpers the pages' modules share (the chat client's modules,
// attach.js, media.js, chatmenu.js, search.js, and the Monitor's
// monitor.js), so each builds elements the same way.

// $ is the element with id.
export const $ = (id) => document.getElementById(id);

// el builds <tag> with attrs and children. An attribute whose value is
// null, undefined or false is left out, true sets it empty, class sets
// className; a child that is null, undefined or false is skipped and a
// string becomes a text node.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c == null || c === false) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}
