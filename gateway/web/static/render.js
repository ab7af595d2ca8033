// Mirror browser client: rendering, batched to one frame: the chat list,
// the header with the context ring, the composer, and the keyed
// reconcile the transcript uses too; toasts.

import { titleWith, waitingCount } from './attention.js';
import { el as h } from './dom.js';
import { ringLines, ringScale } from './limits.js';
import { dom } from './page.js';
import { tokens } from './panels.js';
import { num } from './reducer.js';
import { currentView, S } from './state.js';
import { renderConversation } from './transcript.js';

export let renderQueued = false;

export function render() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(flushRender);
  setTimeout(flushRender, 150); // rAF does not run in hidden tabs
}

export function flushRender() {
  if (!renderQueued) return;
  renderQueued = false;
  renderList();
  renderHeader();
  renderConversation();
  renderComposer();
}

export function setStatus(state) {
  const text = { connecting: 'Connecting…', connected: 'Connected', reconnecting: 'Reconnecting…' }[state] || state;
  dom.status.dataset.state = state;
  dom.status.textContent = text;
  dom.app.dataset.conn = state;
}

export function sortedChats() {
  // Archived chats are listed by manage.js under Archived; deleted ones nowhere.
  return S.order.map((id) => S.chats.get(id)).filter((c) => c && !c.archived && !c.delete_at);
}

export function chatName(c) {
  return (c && c.title && String(c.title).trim()) || 'New chat';
}

export function isRunning(id) {
  const v = S.views.get(id);
  const c = S.chats.get(id);
  if (id === S.current && v && v.subscribed && v.loaded) return Boolean(v.running) || c?.state === 'running';
  return c?.state === 'running';
}

export function renderList() {
  const chats = sortedChats();
  dom.listEmpty.hidden = chats.length > 0;
  const items = chats.map((c) => {
    const running = isRunning(c.id);
    const pending = num(c.pending, 0);
    const active = c.id === S.current;
    return {
      key: c.id,
      sig: JSON.stringify([chatName(c), running, pending, active, c.updated_at ? shortTime(c.updated_at) : '']),
      render(li) {
        li.className = 'chat-item' + (running ? ' busy' : '') + (active ? ' active' : '');
        li.dataset.chat = c.id;
        const btn = h('button', { class: 'chat-link', type: 'button' });
        if (active) btn.setAttribute('aria-current', 'page');
        const name = h('span', { class: 'chat-name' }, chatName(c));
        const meta = h('span', { class: 'chat-meta' });
        if (running) meta.append(h('span', { class: 'spinner', role: 'img', 'aria-label': 'Working' }));
        if (pending > 0) meta.append(h('span', { class: 'badge', 'aria-label': `${pending} pending` }, String(pending)));
        if (!running && pending === 0 && c.updated_at) meta.append(h('time', { class: 'chat-time', datetime: c.updated_at }, shortTime(c.updated_at)));
        btn.append(name, meta);
        li.replaceChildren(btn);
      },
    };
  });
  reconcile(dom.list, items, 'li');
  document.dispatchEvent(new CustomEvent('mirror:chats', { detail: S.order.map((id) => S.chats.get(id)).filter(Boolean) }));
}

export function renderHeader() {
  const c = S.current ? S.chats.get(S.current) : null;
  const name = c ? chatName(c) : 'Mirror';
  if (dom.title.textContent !== name) dom.title.textContent = name;
  const running = S.current ? isRunning(S.current) : false;
  dom.chatState.hidden = !running;
  // The count of chats waiting for the person goes first (attention.js).
  document.title = titleWith(c ? `${running ? '● ' : ''}${name} · Mirror` : 'Mirror', waitingCount([...S.chats.values()]));
  const v = currentView();
  dom.handoffsOpen.hidden = !c;
  renderRing(v && v.loaded ? v.context : null);
}

// renderRing draws the usage ring against the limit that matters
// (limits.js): the conversation against hard, soft marked, or the request
// against the ceiling, the next checkpoint marked, whichever the reading is
// nearer to.
export function renderRing(ctx) {
  const el = dom.context;
  const s = ringScale(ctx);
  if (!s) {
    el.hidden = true;
    el._sig = null;
    return;
  }
  const { val, den, frac } = s;
  const level = ctx.hard_reached ? 'hard' : ctx.soft_reached ? 'soft' : 'ok';
  const sig = JSON.stringify([s.basis, val, den, s.ticks, level, ctx.soft, ctx.hard, ctx.request, ctx.ceiling, ctx.line || '']);
  el.hidden = false;
  if (el._sig === sig) return;
  el._sig = sig;
  const marks = s.basis === 'hard'
    ? `Soft ${fmtTokens(num(ctx.soft, 0))} · Hard ${fmtTokens(den)}`
    : `Ceiling${num(ctx.next_checkpoint, 0) > 0 ? ` · checkpoint ${fmtTokens(num(ctx.next_checkpoint, 0))}` : ''}`;
  const lines = ringLines(ctx, s);
  el.dataset.level = level;
  el.dataset.basis = s.basis;
  el.title = [...lines, 'Click for the model details.'].join('\n');
  el.setAttribute('aria-valuenow', String(val));
  el.setAttribute('aria-valuemax', String(den));
  el.setAttribute('aria-valuetext', lines.join(' '));
  // The ring: a circle of circumference 100, so the dash is the percentage.
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 36 36');
  svg.setAttribute('class', 'ring');
  svg.setAttribute('aria-hidden', 'true');
  const circle = (cls, dash) => {
    const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', '18');
    c.setAttribute('cy', '18');
    c.setAttribute('r', '15.9155');
    c.setAttribute('class', cls);
    if (dash != null) c.setAttribute('stroke-dasharray', `${dash} 100`);
    return c;
  };
  svg.append(circle('ring-track'), circle('ring-fill', (frac * 100).toFixed(2)));
  // Marks where the lines are: soft against hard, or the next checkpoint
  // against the ceiling.
  for (const [at, cls] of s.ticks) {
    const a = (at / den) * 2 * Math.PI - Math.PI / 2;
    const t = document.createElementNS(NS, 'line');
    t.setAttribute('x1', (18 + 12.5 * Math.cos(a)).toFixed(2));
    t.setAttribute('y1', (18 + 12.5 * Math.sin(a)).toFixed(2));
    t.setAttribute('x2', (18 + 19.5 * Math.cos(a)).toFixed(2));
    t.setAttribute('y2', (18 + 19.5 * Math.sin(a)).toFixed(2));
    t.setAttribute('class', 'tick ' + cls);
    svg.append(t);
  }
  const text = h('span', { class: 'ring-text' },
    h('span', { class: 'ring-value' }, `${fmtTokens(val)} / ${fmtTokens(den)}`),
    h('span', { class: 'ring-marks' }, marks));
  el.replaceChildren(svg, text);
}

export function renderComposer() {
  const running = S.current ? isRunning(S.current) : false;
  const v = currentView();
  dom.stop.hidden = !running;
  dom.stop.disabled = Boolean(v && v.stopping);
  dom.stop.querySelector('span').textContent = v && v.stopping ? 'Stopping…' : 'Stop';
  dom.mode.hidden = !running;
  if (!running) S.redirect = false;
  dom.mode.setAttribute('aria-pressed', String(S.redirect));
  const c = S.current ? S.chats.get(S.current) : null;
  const held = !running && c && c.paused ? num(c.pending, 0) : 0;
  dom.input.placeholder = S.redirect ? 'Steer the running turn…' : running ? 'Queue a message…'
    : held > 0 ? `${held} held — Send to continue` : 'Message Mirror…';
}

export function applyRekeys(container) {
  if (!S.rekeys.length) return;
  const byKey = new Map();
  for (const c of container.children) byKey.set(c.dataset.key, c);
  for (const r of S.rekeys) {
    const node = byKey.get(r.from);
    if (!node) continue;
    let to = r.to;
    if (!to && r.clientId) {
      const v = currentView();
      const m = v && [...v.pending.values(), ...v.history.map((e) => e.m).filter(Boolean)].find((x) => x.client_id === r.clientId);
      to = m ? `m:${m.id}` : null;
    }
    if (to && !byKey.has(to)) {
      node.dataset.key = to;
      node._sig = null;
      byKey.set(to, node);
    }
  }
  S.rekeys = [];
}

// reconcile makes container's children the rendered items, in order, reusing
// the element of each key and re-rendering it only when its sig changed.
export function reconcile(container, items, tag) {
  const existing = new Map();
  for (const c of container.children) if (c.dataset.key) existing.set(c.dataset.key, c);
  const keep = new Set();
  let prev = null;
  for (const it of items) {
    let node = existing.get(it.key);
    if (!node || node.tagName.toLowerCase() !== tag) {
      node = document.createElement(tag);
      node.dataset.key = it.key;
    }
    if (node._sig !== it.sig) {
      it.render(node);
      node.dataset.key = it.key;
      node._sig = it.sig;
    }
    keep.add(node);
    const want = prev ? prev.nextSibling : container.firstChild;
    if (want !== node) container.insertBefore(node, want);
    prev = node;
  }
  for (const c of [...container.children]) if (!keep.has(c)) c.remove();
}

export function emptyItem(text) {
  return {
    key: 'empty',
    sig: 'empty:' + text,
    render(el) {
      el.className = 'empty';
      const logo = document.querySelector('.brand .logo').cloneNode(true);
      el.replaceChildren(logo, h('p', null, text));
    },
  };
}

export function clip(s, n) {
  return s.length > n ? s.slice(0, n) + '…' : s;
}

export function shortTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return d.toLocaleDateString([], { month: 'short', day: 'numeric' });
}

export function fmtTokens(n) {
  n = num(n, 0);
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1).replace(/\.0$/, '') + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1).replace(/\.0$/, '') + 'k';
  return String(n);
}

export let toastN = 0;

export function toast(text, kind) {
  const id = ++toastN;
  const t = h('div', { class: kind ? 'toast ' + kind : 'toast', role: 'alert', 'data-toast': id }, h('span', null, text), h('button', { class: 'toast-close', type: 'button', 'aria-label': 'Dismiss' }, '×'));
  dom.toasts.append(t);
  while (dom.toasts.children.length > 3) dom.toasts.firstChild.remove();
  setTimeout(() => t.remove(), kind === 'command' ? 20000 : 7000);
}

export function autosize(ta) {
  ta.style.height = 'auto';
  ta.style.height = Math.min(ta.scrollHeight + 2, Math.round(window.innerHeight * 0.4)) + 'px';
}
