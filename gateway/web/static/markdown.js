// Markdown for assistant replies, rendered to DOM nodes by kept libraries:
// marked (GitHub-flavoured Markdown), DOMPurify (the sanitizer every rendered
// piece of HTML passes through) and highlight.js (code blocks). They are
// vendored under static/vendor/ by vendor.sh at pinned versions.
//
// Safety, in layers:
//   - Raw HTML in the text is shown as text (the html renderer escapes it),
//     so a model cannot write markup at all; Markdown makes the only tags.
//   - DOMPurify then sanitizes the rendered HTML against a short allow-list
//     of tags and attributes and returns a DocumentFragment, so no HTML
//     string ever reaches innerHTML here.
//   - Links keep an href only for http(s) and mailto URLs (safeHref) and
//     open in a new tab with rel="noopener noreferrer". Images are never
//     loaded: a model-written image becomes a link to it (http(s) only), so
//     a reply cannot fetch a tracking pixel or draw a data: picture.
//
// Kept from the hand-written renderer it replaces: single newlines are line
// breaks, headings sit two levels down (h3..h6, class md-h), tables are
// wrapped in .table-wrap, and a fenced block is .code-block with a bar
// (.code-lang, button.copy that app.js wires) over pre > code[data-lang]; an
// unclosed fence runs to the end, which suits a reply that is still
// streaming.

import { Marked, Renderer } from './vendor/marked/marked.esm.js';
import DOMPurify from './vendor/dompurify/purify.es.mjs';
import hljs from './vendor/highlight/highlight.min.js';

const SAFE_URL = /^(?:https?:|mailto:)/i;

/** safeHref returns url when it is an http(s) or mailto URL, else "". */
export function safeHref(url) {
  const u = String(url ?? '').trim();
  return SAFE_URL.test(u) ? u : '';
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

// highlight returns the code as highlighted HTML when its language is one
// the common build knows, else escaped text. No guessing for unlabeled
// code: auto-detection would run on every streamed delta and often guess
// wrong on short snippets.
function highlight(code, lang) {
  if (lang && hljs.getLanguage(lang)) {
    try {
      return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
    } catch {
      // fall through to plain text
    }
  }
  return esc(code);
}

const renderer = {
  html({ text }) {
    return esc(text);
  },
  heading({ tokens, depth }) {
    const level = Math.min(6, depth + 2);
    return `<h${level} class="md-h">${this.parser.parseInline(tokens)}</h${level}>\n`;
  },
  code({ text, lang }) {
    const name = String(lang || '').match(/^\S*/)[0];
    const data = name ? ` data-lang="${esc(name)}"` : '';
    const cls = name && hljs.getLanguage(name) ? ' class="hljs"' : '';
    return `<div class="code-block"><div class="code-bar"><span class="code-lang">${esc(name)}</span>` +
      '<button class="copy" type="button" aria-label="Copy code">Copy</button></div>' +
      `<pre><code${cls}${data}>${highlight(text.replace(/\n$/, ''), name)}</code></pre></div>\n`;
  },
  link({ href, tokens }) {
    const text = this.parser.parseInline(tokens);
    const safe = safeHref(href);
    return safe ? `<a href="${esc(safe)}">${text}</a>` : text;
  },
  image({ href, text }) {
    const safe = safeHref(href);
    const label = esc(text || href);
    return safe ? `<a href="${esc(safe)}">${label}</a>` : label;
  },
  table(token) {
    return `<div class="table-wrap">${Renderer.prototype.table.call(this, token)}</div>\n`;
  },
};

const md = new Marked({ gfm: true, breaks: true, async: false });
md.use({ renderer });

const ALLOWED_TAGS = ['p', 'br', 'strong', 'em', 'del', 's', 'code', 'pre', 'span', 'div', 'button', 'a',
  'ul', 'ol', 'li', 'blockquote', 'hr', 'h3', 'h4', 'h5', 'h6', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input'];
const ALLOWED_ATTR = ['href', 'class', 'start', 'type', 'aria-label', 'data-lang', 'align', 'checked', 'disabled'];

const purify = DOMPurify(window);
purify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    const href = safeHref(node.getAttribute('href'));
    if (href) {
      node.setAttribute('href', href);
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    } else {
      node.removeAttribute('href');
    }
  }
  // Task-list boxes show state; they are not a form.
  if (node.tagName === 'INPUT' && node.getAttribute('type') !== 'checkbox') node.remove();
  if (node.tagName === 'BUTTON' && !node.classList.contains('copy')) node.replaceWith(...node.childNodes);
});

const CONFIG = {
  ALLOWED_TAGS,
  ALLOWED_ATTR,
  ADD_ATTR: ['target', 'rel'],
  // Not URLs: without this the strict URL pattern below would drop them.
  ADD_URI_SAFE_ATTR: ['data-lang', 'start', 'type', 'align', 'checked', 'disabled'],
  ALLOWED_URI_REGEXP: SAFE_URL,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

// sanitize turns rendered HTML into a DocumentFragment of allowed nodes.
function sanitize(html) {
  const frag = purify.sanitize(html, CONFIG);
  // <th align> / <td align> become styles, as before; nothing else keeps one.
  for (const cell of frag.querySelectorAll('[align]')) {
    const a = cell.getAttribute('align');
    if (a === 'left' || a === 'center' || a === 'right') cell.style.textAlign = a;
    cell.removeAttribute('align');
  }
  return frag;
}

/** renderMarkdown returns a DocumentFragment for src. */
export function renderMarkdown(src) {
  const text = String(src ?? '').replace(/\r\n?/g, '\n');
  return sanitize(md.parse(text));
}

/** inline appends the inline Markdown of text to parent. */
export function inline(text, parent) {
  parent.appendChild(sanitize(md.parseInline(String(text ?? ''))));
}
