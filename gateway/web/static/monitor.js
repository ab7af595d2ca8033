// Mirror monitor: the breaker dashboard at /monitor.
//
// Data: GET /api/breakers (snapshot), the Server-Sent Events of
// GET /api/monitor/events (events "snapshot", "breaker" = one BREAKER after a
// transition, "chats" = {chats:[...]} every 2 s), POST
// /api/breakers/{id}/reset, and GET /api/quotas when the server has it (the
// section stays hidden otherwise). Auth is the mirror_token cookie.
//
// DOM contract (stable; browser tests rely on it):
//
//   #feed                           live feed status; data-state = connecting |
//                                   connected | reconnecting | off
//   #unresolved                     <ul> of open and half-open breakers, newest first
//   .breaker[data-id=ID]            one breaker (in #unresolved or #history);
//                                   data-state and class = its state; children
//                                   .kind, .scope, .state (text: open | half_open |
//                                   closed, as the API spells it), .reason,
//                                   .opened-at, .trips; in #unresolved also
//                                   button.reset (POSTs the reset); in #history
//                                   also .closed-at and .closed-by
//   #history                        closed incidents grouped by date, newest first
//   .day[data-date=YYYY-MM-DD]      one date (UTC) of #history; .day-list holds its
//                                   .breaker entries
//   #running                        <ul> of chats that run a turn or have queued messages
//   .running-chat[data-chat=ID]     one of them; class .busy while running; .title,
//                                   .chat-state, .queue (text: the pending count)
//   #quotas-section                 hidden unless GET /api/quotas answers 200
//   #mcp-section                    hidden unless GET /api/mcp answers 200 with servers;
//   .mcp-server[data-name=NAME]     one server; data-state = starting | ready |
//                                   restarting | unavailable | stopped; children
//                                   .name, .transport, .state, .tools (count),
//                                   .restarts, .error (the last one, secrets redacted)
//   #mon-error                      a problem with the feed (signed out, monitor off)
//   #toasts .toast                  transient errors (a refused reset)
//   #charts                         the charts of the stored aggregates (see charts.js)
//   #cluster-section                the cluster's nodes, in cluster mode (see cluster.js)

import { initCharts } from './charts.js';
import { loadCluster } from './cluster.js';
import { $, el } from './dom.js';


const state = {
  unresolved: new Map(), // id → BREAKER
  history: [],           // [{date, entries:[BREAKER]}], newest first
  chats: [],
};

// ------------------------------------------------------------ helpers

const timeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const clockFmt = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });

function timeEl(cls, iso, fmt = timeFmt) {
  if (!iso) return el('span', { class: cls }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return el('span', { class: cls }, iso);
  return el('time', { class: cls, datetime: iso, title: iso }, fmt.format(d));
}

function toast(text) {
  const t = el('div', { class: 'toast', role: 'alert' }, el('span', {}, text));
  const close = el('button', { class: 'toast-close', type: 'button', 'aria-label': 'Dismiss' }, '×');
  close.addEventListener('click', () => t.remove());
  t.append(close);
  $('toasts').append(t);
  setTimeout(() => t.remove(), 8000);
}

function showError(text) {
  const e = $('mon-error');
  e.textContent = text || '';
  e.hidden = !text;
}

function setFeed(s, text) {
  const f = $('feed');
  f.dataset.state = s;
  f.textContent = text;
}

function byOpenedDesc(a, b) {
  const ta = a.opened_at ? Date.parse(a.opened_at) : 0;
  const tb = b.opened_at ? Date.parse(b.opened_at) : 0;
  if (ta !== tb) return tb - ta;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

// ------------------------------------------------------------ breakers

function breakerEl(v, where) {
  const facts = el('div', { class: 'facts' },
    el('span', {}, 'opened ', timeEl('opened-at', v.opened_at)),
    el('span', {}, 'trips ', el('b', { class: 'trips' }, String(v.trips ?? 0))));
  if (v.state === 'open' && v.retry_at) {
    facts.append(el('span', {}, 'probe after ', timeEl('retry-at', v.retry_at, clockFmt)));
  }
  if (where === 'history') {
    facts.append(el('span', {}, 'closed ', timeEl('closed-at', v.closed_at)));
    if (v.closed_by) facts.append(el('span', { class: 'closed-by' }, v.closed_by === 'manual' ? 'reset by hand' : 'closed automatically'));
  }
  const li = el('li', { class: `breaker ${v.state}`, 'data-id': v.id, 'data-state': v.state },
    el('div', { class: 'breaker-main' },
      el('span', { class: 'kind' }, v.kind),
      el('span', { class: 'scope' }, v.scope || v.id),
      el('span', { class: 'state' }, v.state)),
    el('div', { class: 'reason' }, v.reason || ''),
    facts);
  if (where === 'unresolved') {
    li.append(el('div', { class: 'actions' },
      el('button', { class: 'btn btn-sm reset', type: 'button', 'data-id': v.id, title: 'Close this breaker now and let requests through' }, 'Reset')));
  }
  return li;
}

function renderUnresolved(freshId) {
  const list = $('unresolved');
  const views = [...state.unresolved.values()].sort(byOpenedDesc);
  list.replaceChildren(...views.map((v) => {
    const li = breakerEl(v, 'unresolved');
    if (v.id === freshId) li.classList.add('fresh');
    return li;
  }));
  $('unresolved-empty').hidden = views.length > 0;
  const count = $('unresolved-count');
  count.textContent = String(views.length);
  count.dataset.n = String(views.length);
  document.title = views.length ? `(${views.length}) Monitor · Mirror` : 'Monitor · Mirror';
}

function renderHistory() {
  const box = $('history');
  box.replaceChildren(...state.history.map((g) =>
    el('section', { class: 'day', 'data-date': g.date },
      el('h3', {}, g.date),
      el('ul', { class: 'day-list' }, ...g.entries.map((v) => breakerEl(v, 'history'))))));
  $('history-empty').hidden = state.history.length > 0;
}

function applySnapshot(snap) {
  state.unresolved = new Map((snap.unresolved || []).map((v) => [v.id, v]));
  state.history = (snap.history || []).map((g) => ({ date: g.date, entries: [...(g.entries || [])] }));
  renderUnresolved();
  renderHistory();
}

// applyBreaker takes one BREAKER after a transition. Applying one twice
// changes nothing (the feed may repeat one that the snapshot held).
function applyBreaker(v) {
  if (v.state !== 'closed') {
    const known = state.unresolved.has(v.id);
    state.unresolved.set(v.id, v);
    renderUnresolved(known ? undefined : v.id);
    return;
  }
  const was = state.unresolved.delete(v.id);
  if (v.closed_at) {
    const date = v.closed_at.slice(0, 10); // RFC 3339 UTC: the server's grouping
    let g = state.history.find((x) => x.date === date);
    if (!g) {
      g = { date, entries: [] };
      state.history.push(g);
      state.history.sort((a, b) => (a.date < b.date ? 1 : a.date > b.date ? -1 : 0));
    }
    if (!g.entries.some((e) => e.id === v.id && e.closed_at === v.closed_at)) {
      g.entries.unshift(v);
      g.entries.sort((a, b) => Date.parse(b.closed_at) - Date.parse(a.closed_at));
    }
    renderHistory();
  }
  if (was) renderUnresolved();
}

async function refresh() {
  const res = await fetch('/api/breakers', { headers: { Accept: 'application/json' } });
  if (!res.ok) return res.status;
  applySnapshot(await res.json());
  return 200;
}

async function reset(button) {
  const id = button.dataset.id;
  button.disabled = true;
  try {
    const res = await fetch(`/api/breakers/${encodeURIComponent(id)}/reset`, {
      method: 'POST', headers: { Accept: 'application/json' },
    });
    if (!res.ok) {
      let msg = `Reset failed (${res.status})`;
      try { const body = await res.json(); if (body && body.error) msg = `Reset failed: ${body.error}`; } catch { /* not JSON */ }
      toast(msg);
      button.disabled = false;
      if (res.status === 401) signedOut();
      return;
    }
    // The feed brings the closed breaker too; this covers a feed that is down.
    await refresh();
  } catch (err) {
    toast(`Reset failed: ${err && err.message ? err.message : err}`);
    button.disabled = false;
  }
}

// ------------------------------------------------------------ chats

function renderChats() {
  const list = $('running');
  const busy = state.chats.filter((c) => c.state === 'running' || (c.pending || 0) > 0);
  list.replaceChildren(...busy.map((c) => {
    const running = c.state === 'running';
    return el('li', { class: running ? 'running-chat busy' : 'running-chat', 'data-chat': c.id },
      el('span', { class: 'title' }, c.title || 'Untitled chat'),
      el('span', { class: 'chat-state' }, running ? 'Running' : 'Waiting'),
      el('span', { class: 'queue', title: 'Messages waiting in the queue' }, String(c.pending || 0)));
  }));
  $('running-empty').hidden = busy.length > 0;
  $('running-count').textContent = String(busy.length);
}

// ------------------------------------------------------------ quotas

function cell(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function renderQuotas(data) {
  const box = $('quotas');
  const rows = Array.isArray(data) ? data : Array.isArray(data && data.quotas) ? data.quotas : null;
  if (rows && rows.length && rows.every((r) => r && typeof r === 'object' && !Array.isArray(r))) {
    const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
    box.replaceChildren(el('table', {},
      el('thead', {}, el('tr', {}, ...cols.map((c) => el('th', { scope: 'col' }, c)))),
      el('tbody', {}, ...rows.map((r) => el('tr', {}, ...cols.map((c) => el('td', {}, cell(r[c]))))))));
  } else if (rows && rows.length === 0) {
    box.replaceChildren(el('p', { class: 'mon-empty' }, 'No quota reported yet.'));
  } else {
    box.replaceChildren(el('pre', {}, JSON.stringify(data, null, 2)));
  }
}

// loadQuotas shows the section only while GET /api/quotas answers 200 with
// JSON; anything else (the route does not exist yet) hides it quietly.
async function loadQuotas() {
  let ok = false;
  try {
    const res = await fetch('/api/quotas', { headers: { Accept: 'application/json' } });
    if (res.status === 200 && (res.headers.get('Content-Type') || '').includes('json')) {
      renderQuotas(await res.json());
      ok = true;
    }
  } catch { /* hidden */ }
  $('quotas-section').hidden = !ok;
  if (ok) setTimeout(loadQuotas, 30000);
}

// loadMCP shows the MCP servers while GET /api/mcp answers 200 with some,
// every 5 s: their state changes without a breaker transition (a start).
async function loadMCP() {
  let servers = null;
  try {
    const res = await fetch('/api/mcp', { headers: { Accept: 'application/json' } });
    if (res.status === 200) servers = (await res.json()).servers || [];
  } catch { /* hidden */ }
  const ok = Array.isArray(servers) && servers.length > 0;
  $('mcp-section').hidden = !ok;
  if (!ok) return;
  $('mcp-count').textContent = String(servers.length);
  $('mcp').replaceChildren(...servers.map((s) => el('li', { class: `mcp-server ${s.state}`, 'data-name': s.name, 'data-state': s.state },
    el('span', { class: 'name' }, s.name),
    el('span', { class: 'transport' }, s.transport),
    el('span', { class: 'state' }, s.state),
    el('span', { class: 'tools', title: 'tools' }, String(s.tools)),
    el('span', { class: 'restarts', title: 'restarts' }, String(s.restarts)),
    s.error ? el('span', { class: 'error' }, s.error) : null)));
  setTimeout(loadMCP, 5000);
}

// loadUsage shows each person's tokens (and, from the cost ledger, requests
// and cost) of today (UTC) while GET
// /api/people/usage answers 200: owners only, with people kept.
async function loadUsage() {
  let ok = false;
  try {
    const res = await fetch('/api/people/usage', { headers: { Accept: 'application/json' } });
    if (res.status === 200) {
      const d = await res.json();
      const cap = d.tokens_per_day ? ` of ${d.tokens_per_day.toLocaleString()}` : '';
      $('usage').replaceChildren(...(d.usage || []).map((u) =>
        el('li', {}, `${u.name} (${u.role}): ${u.tokens.toLocaleString()} tokens${cap}` +
          (u.cost ? `, ${u.cost.requests.toLocaleString()} requests, $${u.cost.cost.toFixed(4)}` : ''))));
      if (!(d.usage || []).length) $('usage').replaceChildren(el('li', {}, 'Nobody has used a token today.'));
      ok = true;
    }
  } catch { /* hidden */ }
  $('usage-section').hidden = !ok;
  if (ok) setTimeout(loadUsage, 30000);
}

// ------------------------------------------------------------ feed

let source = null;
let retry = null;

function signedOut() {
  setFeed('off', 'Signed out');
  showError('You are signed out. Sign in again at /login, then come back to /monitor.');
}

function connect() {
  clearTimeout(retry);
  if (source) source.close();
  const es = new EventSource('/api/monitor/events');
  source = es;
  es.addEventListener('open', () => {
    setFeed('connected', 'Live');
    showError('');
  });
  const on = (name, fn) => es.addEventListener(name, (ev) => {
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    fn(data);
  });
  on('snapshot', applySnapshot);
  on('breaker', applyBreaker);
  on('chats', (d) => { state.chats = d.chats || []; renderChats(); });
  es.addEventListener('error', async () => {
    if (es !== source) return;
    if (es.readyState !== EventSource.CLOSED) {
      setFeed('reconnecting', 'Reconnecting…');
      return;
    }
    // The browser gave up (an answer other than 200): find out why.
    let status = 0;
    try { status = await refresh(); } catch { /* down */ }
    if (es !== source) return;
    if (status === 401) { signedOut(); return; }
    if (status === 503) {
      setFeed('off', 'Monitor off');
      showError('The breaker monitor is not running in this gateway.');
      return;
    }
    setFeed('reconnecting', 'Reconnecting…');
    retry = setTimeout(connect, 3000);
  });
}

$('unresolved').addEventListener('click', (ev) => {
  const b = ev.target.closest('button.reset');
  if (b && !b.disabled) reset(b);
});

renderUnresolved();
renderHistory();
renderChats();
connect();
loadQuotas();
initCharts();
loadMCP();
loadUsage();
loadCluster();
