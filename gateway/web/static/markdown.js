// Light Markdown for assistant replies, rendered to DOM nodes.
//
// Safety: model text never reaches innerHTML. Every piece of text becomes a
// Text node or an element's textContent; the only attribute taken from the
// text is a link's href, and only for http(s) and mailto URLs.
//
// Supported: paragraphs (single newlines kept as line breaks), **bold**,
// *italic*, ~~strike~~, `code`, fenced code blocks (``` or ~~~, unclosed fences
// run to the end, which suits a reply that is still streaming), ordered and
// unordered lists (nested by indentation), headings, block quotes, rules,
// simple pipe tables, [links](url) and bare URLs.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;
const BLANK = /^\s*$/;

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

/** renderMarkdown returns a DocumentFragment for src. */
export function renderMarkdown(src) {
  const frag = document.createDocumentFragment();
  const text = String(src ?? '').replace(/\r\n?/g, '\n');
  blocks(text.split('\n'), frag, 0);
  return frag;
}

function indentOf(line) {
  let n = 0;
  for (const c of line) {
    if (c === ' ') n++;
    else if (c === '\t') n += 4;
    else break;
  }
  return n;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function blocks(lines, parent, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) { i++; continue; }

    let m = FENCE.exec(line);
    if (m) {
      const fence = m[1];
      const lang = m[2] || '';
      const body = [];
      i++;
      while (i < lines.length) {
        const l = lines[i];
        const t = l.trim();
        if (t.length >= fence.length && [...t].every((ch) => ch === fence[0])) { i++; break; }
        body.push(l);
        i++;
      }
      parent.appendChild(codeBlock(body.join('\n'), lang));
      continue;
    }

    if (RULE.test(line)) { parent.appendChild(el('hr')); i++; continue; }

    m = HEADING.exec(line);
    if (m) {
      const level = Math.min(6, m[1].length + 2);
      const h = el('h' + level, 'md-h');
      inline(m[2], h);
      parent.appendChild(h);
      i++;
      continue;
    }

    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && !BLANK.test(lines[i])) {
        const q = QUOTE.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      const bq = el('blockquote');
      if (depth < 8) blocks(body, bq, depth + 1);
      else paragraph(body, bq);
      parent.appendChild(bq);
      continue;
    }

    if (ITEM.test(line)) {
      i = list(lines, i, parent, depth);
      continue;
    }

    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      i = table(lines, i, parent);
      continue;
    }

    const para = [];
    while (i < lines.length && !BLANK.test(lines[i]) && (para.length === 0 || !startsBlock(lines[i]))) {
      para.push(lines[i]);
      i++;
    }
    paragraph(para, parent);
  }
}

function paragraph(lines, parent) {
  const p = el('p');
  lines.forEach((l, k) => {
    if (k > 0) p.appendChild(el('br'));
    inline(l.trim(), p);
  });
  parent.appendChild(p);
}

function codeBlock(code, lang) {
  const wrap = el('div', 'code-block');
  const bar = el('div', 'code-bar');
  const name = el('span', 'code-lang');
  name.textContent = lang;
  const copy = el('button', 'copy');
  copy.type = 'button';
  copy.textContent = 'Copy';
  copy.setAttribute('aria-label', 'Copy code');
  bar.append(name, copy);
  const pre = el('pre');
  const c = el('code');
  if (lang) c.dataset.lang = lang;
  c.textContent = code;
  pre.appendChild(c);
  wrap.append(bar, pre);
  return wrap;
}

function list(lines, i, parent, depth) {
  const first = ITEM.exec(lines[i]);
  const base = indentOf(first[1]);
  const ordered = /\d/.test(first[2]);
  const root = el(ordered ? 'ol' : 'ul');
  if (ordered) {
    const start = parseInt(first[2], 10);
    if (start !== 1) root.start = start;
  }
  let item = null; // {lines: []}
  const items = [];
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      // A blank line ends the list unless an indented line or another item follows.
      const next = lines[i + 1];
      if (next !== undefined && !BLANK.test(next) && (indentOf(next) > base || (ITEM.test(next) && indentOf(next) >= base))) {
        if (item) item.lines.push('');
        i++;
        continue;
      }
      break;
    }
    const m = ITEM.exec(line);
    const ind = indentOf(line);
    if (m && ind <= base + 1 && /\d/.test(m[2]) === ordered) {
      item = { lines: [m[3]] };
      items.push(item);
      i++;
      continue;
    }
    if (m && ind <= base + 1) break; // a list of the other kind starts
    if (ind > base && item) {
      item.lines.push(line.slice(Math.min(ind, base + 2 + (ordered ? 1 : 0))));
      i++;
      continue;
    }
    if (item && !startsBlock(line)) { // lazy continuation
      item.lines.push(line.trim());
      i++;
      continue;
    }
    break;
  }
  for (const it of items) {
    const li = el('li');
    const nested = it.lines.slice(1).some((l) => !BLANK.test(l) && startsBlock(l.trimStart()));
    if (!nested && !it.lines.includes('')) {
      it.lines.forEach((l, k) => {
        if (k > 0) li.appendChild(el('br'));
        inline(l.trim(), li);
      });
    } else if (depth < 8) {
      blocks(it.lines, li, depth + 1);
    } else {
      paragraph(it.lines, li);
    }
    root.appendChild(li);
  }
  parent.appendChild(root);
  return i;
}

function cells(line) {
  let t = line.trim();
  if (t.startsWith('|')) t = t.slice(1);
  if (t.endsWith('|') && !t.endsWith('\\|')) t = t.slice(0, -1);
  const out = [];
  let cur = '';
  for (let k = 0; k < t.length; k++) {
    if (t[k] === '\\' && t[k + 1] === '|') { cur += '|'; k++; continue; }
    if (t[k] === '|') { out.push(cur.trim()); cur = ''; continue; }
    cur += t[k];
  }
  out.push(cur.trim());
  return out;
}

function table(lines, i, parent) {
  const head = cells(lines[i]);
  const aligns = cells(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : ''));
  i += 2;
  const wrap = el('div', 'table-wrap');
  const tbl = el('table');
  const thead = el('thead');
  const tr = el('tr');
  head.forEach((c, k) => {
    const th = el('th');
    if (aligns[k]) th.style.textAlign = aligns[k];
    inline(c, th);
    tr.appendChild(th);
  });
  thead.appendChild(tr);
  tbl.appendChild(thead);
  const tbody = el('tbody');
  while (i < lines.length && !BLANK.test(lines[i]) && lines[i].includes('|')) {
    const row = el('tr');
    const cs = cells(lines[i]);
    for (let k = 0; k < head.length; k++) {
      const td = el('td');
      if (aligns[k]) td.style.textAlign = aligns[k];
      inline(cs[k] ?? '', td);
      row.appendChild(td);
    }
    tbody.appendChild(row);
    i++;
  }
  tbl.appendChild(tbody);
  wrap.appendChild(tbl);
  parent.appendChild(wrap);
  return i;
}

const ESCAPABLE = '\\`*_{}[]()#+-.!~|>';
const URL_RE = /^https?:\/\/[^\s<>"]*[^\s<>"'.,;:!?)\]}]/;
const LINK_RE = /^\[([^\]\n]{1,500})\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\)){1,2000})>?(?:\s+"[^"]*")?\s*\)/;
const ANGLE_URL_RE = /^<(https?:\/\/[^\s<>]{1,2000})>/;

/** safeHref returns url when it is an http(s) or mailto URL, else "". */
export function safeHref(url) {
  const u = String(url).trim();
  return /^(https?:|mailto:)/i.test(u) ? u : '';
}

function link(href, text) {
  const a = el('a');
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  a.textContent = text;
  return a;
}

function isWord(c) {
  return c !== undefined && /[\p{L}\p{N}]/u.test(c);
}

/** inline appends the inline Markdown of text to parent. */
export function inline(text, parent, depth = 0) {
  let buf = '';
  const flush = () => {
    if (buf) { parent.appendChild(document.createTextNode(buf)); buf = ''; }
  };
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i];

    if (c === '\\' && i + 1 < n && ESCAPABLE.includes(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }

    if (c === '`') {
      let run = 1;
      while (text[i + run] === '`') run++;
      const ticks = '`'.repeat(run);
      const close = text.indexOf(ticks, i + run);
      if (close !== -1) {
        flush();
        const code = el('code');
        let body = text.slice(i + run, close);
        if (body.length > 2 && body.startsWith(' ') && body.endsWith(' ')) body = body.slice(1, -1);
        code.textContent = body;
        parent.appendChild(code);
        i = close + run;
        continue;
      }
      buf += ticks;
      i += run;
      continue;
    }

    if (depth < 6 && (c === '*' || c === '_') && text[i + 1] === c && text[i + 2] !== undefined && text[i + 2] !== ' ') {
      const close = text.indexOf(c + c, i + 2);
      if (close > i + 2 && text[close - 1] !== ' ' && !(c === '_' && isWord(text[close + 2]))) {
        flush();
        const s = el('strong');
        inline(text.slice(i + 2, close), s, depth + 1);
        parent.appendChild(s);
        i = close + 2;
        continue;
      }
    }

    if (depth < 6 && c === '~' && text[i + 1] === '~') {
      const close = text.indexOf('~~', i + 2);
      if (close > i + 2) {
        flush();
        const s = el('del');
        inline(text.slice(i + 2, close), s, depth + 1);
        parent.appendChild(s);
        i = close + 2;
        continue;
      }
    }

    if (depth < 6 && (c === '*' || c === '_') && text[i + 1] !== undefined && text[i + 1] !== ' ' && text[i + 1] !== c &&
        !(c === '_' && isWord(text[i - 1]))) {
      let close = -1;
      for (let k = i + 1; k < n; k++) {
        if (text[k] === '`') break;
        if (text[k] === c && text[k - 1] !== ' ' && text[k + 1] !== c && !(c === '_' && isWord(text[k + 1]))) { close = k; break; }
      }
      if (close > i + 1) {
        flush();
        const em = el('em');
        inline(text.slice(i + 1, close), em, depth + 1);
        parent.appendChild(em);
        i = close + 1;
        continue;
      }
    }

    if (c === '[') {
      const m = LINK_RE.exec(text.slice(i, i + 2600));
      if (m) {
        const href = safeHref(m[2]);
        flush();
        if (href) {
          const a = el('a');
          a.href = href;
          a.target = '_blank';
          a.rel = 'noopener noreferrer';
          inline(m[1], a, depth + 1);
          parent.appendChild(a);
        } else {
          inline(m[1], parent, depth + 1);
        }
        i += m[0].length;
        continue;
      }
    }

    if (c === '<') {
      const m = ANGLE_URL_RE.exec(text.slice(i, i + 2010));
      if (m) {
        flush();
        parent.appendChild(link(m[1], m[1]));
        i += m[0].length;
        continue;
      }
    }

    if ((c === 'h' || c === 'H') && (i === 0 || /[\s(<]/.test(text[i - 1]))) {
      const m = URL_RE.exec(text.slice(i, i + 2000));
      if (m) {
        flush();
        parent.appendChild(link(m[0], m[0]));
        i += m[0].length;
        continue;
      }
    }

    buf += c;
    i++;
  }
  flush();
}
