// Mirror browser client: the conversation's items (messages, the
// streaming reply, errors, diagnostics, dividers, boundaries, cards).

import { loadOlder } from './actions.js';
import { allowChatButton, approvalDetail } from './approvals.js';
import { el as h } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { renderNote } from './notes.js';
import { attachmentsEl } from './media.js';
import { menuItems, modelMark, regenMark } from './message-actions.js';
import { dom } from './page.js';
import { hasOutbox, outboxItem, pendingItem } from './queue.js';
import { waitNotice } from './quota.js';
import { num } from './reducer.js';
import { applyRekeys, emptyItem, reconcile, render, shortTime } from './render.js';
import { currentView, S } from './state.js';

export function renderConversation() {
  const v = currentView();
  const sc = dom.scroller;
  const atBottom = S.stick;
  const items = [];
  if (!S.current) {
    items.push(emptyItem(S.chats.size ? 'Pick a chat on the left, or start a new one.' : 'Start a conversation — type a message below.'));
  } else if (!v || (!v.loaded && !hasOutbox(S.current))) {
    items.push({ key: 'loading', sig: 'loading', render: (el) => { el.className = 'loading'; el.replaceChildren(h('span', { class: 'spinner' }), document.createTextNode(' Loading…')); } });
  } else {
    // The one checkpoint divider goes after the last message the
    // checkpoint in force evicted.
    if (v.before) items.push(olderItem(v));
    let cp = null;
    if (v.checkpointThrough > 0) {
      for (const e of v.history) if (e.kind === 'msg' && num(e.m.seq, 0) > 0 && num(e.m.seq, 0) <= v.checkpointThrough) cp = e;
    }
    for (const e of v.history) {
      if (e.kind === 'msg') {
        if (v.deferred.has(e.m.id)) continue;
        items.push(e.m.state === 'continuity' ? continuityItem(v, e.m) : messageItem(v, e.m));
        if (e === cp) items.push(dividerItem({ key: 'checkpoint', text: 'Earlier turns checkpointed', cls: 'checkpoint' }));
      } else if (e.kind === 'error') {
        items.push(errorItem(v, e));
      } else if (e.kind === 'diag') {
        items.push(diagItem(v, e));
      } else if (e.kind === 'divider') {
        items.push(dividerItem(e));
      } else if (e.kind === 'boundary') {
        items.push(boundaryItem(v, e));
      } else if (e.kind === 'note') {
        items.push(noteItem(e));
      }
    }
    if (v.running) items.push(streamingItem(v.running));
    for (const [id, a] of v.approvals) items.push(approvalItem(v, id, a));
    for (const [id, r] of v.recoveries) items.push(recoveryItem(v, id, r));
    const pend = [...v.pending.values()].sort((a, b) => num(a.seq, 0) - num(b.seq, 0));
    for (const id of v.deferred) {
      const e = v.index.get(id);
      if (e) items.push(pendingItem(v, e.m));
    }
    for (const m of pend) items.push(pendingItem(v, m));
    for (const e of S.outbox) if (e.chat === v.id) items.push(outboxItem(e));
    if (items.length === 0) items.push(emptyItem('No messages yet. Say hello.'));
  }
  applyRekeys(dom.messages);
  reconcile(dom.messages, items, 'div');
  if (atBottom) sc.scrollTop = sc.scrollHeight;
  // Nothing to scroll yet: the older page comes without asking.
  if (v && v.before && !v.loadingOlder && sc.scrollHeight <= sc.clientHeight) queueMicrotask(loadOlder);
}

// olderItem heads a chat whose older messages are not loaded yet.
export function olderItem(v) {
  return {
    key: 'older',
    sig: 'older:' + v.loadingOlder,
    render(el) {
      el.className = 'older';
      const b = h('button', { type: 'button', class: 'btn btn-ghost btn-sm load-older' }, v.loadingOlder ? 'Loading earlier messages…' : 'Load earlier messages');
      b.disabled = v.loadingOlder;
      b.addEventListener('click', loadOlder);
      el.replaceChildren(b);
    },
  };
}

export function noticeEls(v, id) {
  const out = [];
  if (v.notices.has(id)) out.push(h('p', { class: 'notice in-use', role: 'status' }, v.notices.get(id)));
  if (v.errors.has(id)) out.push(h('p', { class: 'notice error', role: 'alert' }, v.errors.get(id)));
  return out;
}

export const oids = new WeakMap();

export let oidN = 0;

// oid names an object; history entries are replaced, never mutated, when a
// message changes, so the id stands for its content in a render signature.
export function oid(o) {
  let n = oids.get(o);
  if (!n) oids.set(o, (n = ++oidN));
  return n;
}

export function messageItem(v, m) {
  const role = m.role === 'assistant' ? 'assistant' : 'user';
  const notice = v.notices.get(m.id) || '';
  const menuable = !String(m.id).startsWith('turn-');
  const menuOpen = menuable && S.menu && S.menu.chat === v.id && S.menu.message === m.id;
  // A turn's details go under its answer; a failed turn's under its error.
  const diags = role === 'assistant' && m.turn && m.state !== 'step' && m.state !== 'failed' && !m.failed ? v.diags.get(m.turn) || [] : [];
  const diagOpen = v.expanded.has(`d:${m.turn}`);
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['msg', oid(m), notice, v.errors.get(m.id) || '', menuOpen, diags.length, diagOpen]),
    render(el) {
      // A failed turn's partial answer: failed live, state failed when stored.
      const failed = m.failed || m.state === 'failed';
      el.className = `msg ${role}` + (m.stopped ? ' stopped' : '') + (failed ? ' failed' : '');
      el.dataset.message = m.id;
      el.removeAttribute('data-turn');
      el.removeAttribute('aria-busy');
      el.removeAttribute('data-mode');
      el.removeAttribute('data-state');
      el.removeAttribute('data-client-id');
      if (m.turn) el.dataset.turn = m.turn;
      const body = h('div', { class: 'bubble' });
      if (role === 'assistant') {
        const md = h('div', { class: 'md' });
        md.append(renderMarkdown(m.text || ''));
        body.append(md);
      } else if (m.text || !m.attachments?.length) {
        body.append(h('div', { class: 'text' }, m.text || ''));
      }
      const files = attachmentsEl(m, { large: role === 'assistant' });
      if (files) body.append(files);
      el.classList.toggle('pinned', Boolean(m.pinned));
      const meta = h('div', { class: 'meta' });
      if (m.stopped) meta.append(h('span', { class: 'stopped-mark' }, 'Stopped'));
      if (failed) meta.append(h('span', { class: 'failed-mark' }, 'Incomplete'));
      for (const mark of [modelMark(m), regenMark(m)]) if (mark) meta.append(mark);
      if (m.time) meta.append(h('time', { datetime: m.time }, shortTime(m.time)));
      let menu = null;
      if (menuable) {
        const menuId = `menu-${m.id}`;
        meta.append(h('button', { class: 'msg-menu-btn', type: 'button', 'aria-label': 'Message actions', 'aria-haspopup': 'menu',
          'aria-expanded': String(menuOpen), 'aria-controls': menuOpen ? menuId : null, title: 'Message actions' }, '⋯'));
        if (menuOpen) {
          menu = h('div', { class: 'msg-menu', role: 'menu', id: menuId, 'aria-label': 'Message actions' },
            ...menuItems(v.history.filter((e) => e.kind === 'msg').map((e) => e.m), m),
            h('button', { class: 'pin', type: 'button', role: 'menuitem' }, m.pinned ? 'Unpin from agent context' : 'Pin to agent context'));
        }
      }
      const pinned = m.pinned ? h('div', { class: 'pinned-mark', title: 'The next checkpoint keeps this message whole' },
        h('span', { class: 'pin-icon', 'aria-hidden': 'true' }), 'Pinned to agent context') : null;
      const parts = [];
      if (role === 'assistant') parts.push(avatar());
      const col = h('div', { class: 'col' }, body, meta, menu, pinned, diagDetails(v, m.turn, diags), ...noticeEls(v, m.id));
      if (menuOpen) requestAnimationFrame(() => col.querySelector('.msg-menu button')?.focus());
      parts.push(col);
      el.replaceChildren(...parts);
    },
  };
}

export function avatar() {
  const a = h('div', { class: 'avatar', 'aria-hidden': 'true' });
  a.append(document.querySelector('.brand .logo').cloneNode(true));
  return a;
}

export function streamingItem(r) {
  return {
    key: `t:${r.turn}`,
    sig: JSON.stringify(['stream', r.text, r.tools, r.wait]),
    render(el) {
      el.className = 'msg assistant streaming';
      el.dataset.turn = r.turn;
      el.removeAttribute('data-message');
      el.setAttribute('aria-busy', 'true');
      const md = h('div', { class: 'md' });
      const caret = h('span', { class: 'caret', 'aria-hidden': 'true' });
      if (r.text) {
        md.append(renderMarkdown(r.text));
        const last = md.lastElementChild;
        if (last && /^(P|LI|H\d)$/.test(last.tagName)) last.append(caret);
        else if (last && (last.tagName === 'UL' || last.tagName === 'OL') && last.lastElementChild) last.lastElementChild.append(caret);
        else md.append(caret);
      } else {
        md.append(h('span', { class: 'typing', 'aria-label': 'The assistant is writing' }, h('i'), h('i'), h('i')));
      }
      const body = h('div', { class: 'bubble' }, md);
      const col = h('div', { class: 'col' });
      if (r.tools.length) {
        const tools = h('div', { class: 'tools' });
        for (const t of r.tools) {
          const label = t.progress && !t.done ? `${t.name}: ${t.progress}` : t.name;
          tools.append(h('span', { class: 'tool' + (t.done ? ' done' : '') + (t.failed ? ' failed' : ''), role: t.progress ? 'status' : null }, label));
        }
        col.append(tools);
      }
      col.append(body);
      if (r.wait) col.append(waitNotice(h, r.wait));
      el.replaceChildren(avatar(), col);
    },
  };
}

export function errorItem(v, e) {
  const diags = e.turn ? v.diags.get(e.turn) || [] : [];
  const open = v.expanded.has(`d:${e.turn}`);
  return {
    key: e.key,
    sig: JSON.stringify(['err', e.text, e.cls, e.title || '', diags.length, open]),
    render(el) {
      el.className = 'msg error' + (e.extra ? ' ' + e.extra : '');
      el.setAttribute('role', 'alert');
      if (e.turn) el.dataset.turn = e.turn;
      el.replaceChildren(h('div', { class: 'bubble' }, h('strong', null, e.title || 'The reply failed'), h('span', null, ': ' + e.text), e.cls ? h('span', { class: 'error-class' }, e.cls) : null),
        diagDetails(v, e.turn, diags));
    },
  };
}

// diagDetails is the expandable details of a turn: one row per model
// attempt (and hook block), as the record kept them; null when none.
export function diagDetails(v, turn, diags) {
  if (!diags.length) return null;
  const key = `d:${turn}`;
  const d = h('details', { class: 'diagnostics', 'data-turn': turn, open: v.expanded.has(key) });
  const attempts = diags.filter((x) => x.kind === 'attempt').length;
  d.append(h('summary', null, `Details · ${attempts === 1 ? '1 model attempt' : `${attempts} model attempts`}`));
  const list = h('ol', { class: 'diag-list' });
  for (const x of diags) list.append(diagRow(x));
  d.append(list);
  d.addEventListener('toggle', () => {
    if (d.open) v.expanded.add(key);
    else v.expanded.delete(key);
  });
  return d;
}

// diagRow is one diagnostic, each fact in a span[data-field].
export function diagRow(x) {
  const li = h('li', { class: 'diag', 'data-kind': x.kind || '', 'data-outcome': x.outcome || '' });
  const field = (name, label, value) => {
    if (value === undefined || value === null || value === '' || value === 0) return;
    li.append(h('span', { class: 'diag-field', 'data-field': name }, h('span', { class: 'diag-label' }, label + ' '), String(value)));
  };
  if (x.kind === 'attempt') {
    field('attempt', '#', x.attempt);
    field('purpose', 'for', x.purpose && x.purpose !== 'turn' ? x.purpose : '');
    field('model', 'asked', x.remote ? `${x.model} (${x.remote})` : x.model);
    field('answered', 'answered by', x.answered);
    field('outcome', 'outcome', x.outcome);
    field('status', 'HTTP', x.status);
    field('latency', 'took', x.latency_ms !== undefined ? `${x.latency_ms} ms` : '');
    field('request-id', 'request id', x.request_id);
  } else {
    field('kind', x.kind === 'hook' ? 'hook' : 'command', x.name);
    field('outcome', 'outcome', x.outcome);
  }
  field('error', '—', x.error);
  return li;
}

// diagItem is a diagnostic of no turn (a failed command), collapsed.
export function diagItem(v, e) {
  const key = `dx:${e.seq}`;
  const open = v.expanded.has(key);
  return {
    key: e.key,
    sig: JSON.stringify(['diag', e.seq, open]),
    render(el) {
      el.className = 'note diag-note';
      el.dataset.seq = String(e.seq);
      const d = h('details', { class: 'diagnostics', open }, h('summary', null, `${e.d.name || 'A command'} failed`), h('ol', { class: 'diag-list' }, diagRow(e.d)));
      d.addEventListener('toggle', () => {
        if (d.open) v.expanded.add(key);
        else v.expanded.delete(key);
      });
      el.replaceChildren(d);
    },
  };
}

export function dividerItem(e) {
  return {
    key: e.key,
    sig: 'div:' + e.text + ':' + (e.cls || ''),
    render(el) {
      el.className = 'divider' + (e.cls ? ' ' + e.cls : '');
      el.setAttribute('role', 'separator');
      el.replaceChildren(h('span', null, e.text));
    },
  };
}

export function noteItem(e) {
  return {
    key: e.key,
    sig: 'note:' + (e.head || '') + '\n' + e.text,
    render(el) {
      renderNote(h, el, e);
    },
  };
}

export function noteLink(name) {
  return h('a', { class: 'note-link', href: `/api/memory/${encodeURIComponent(name)}`, 'data-note': name, title: name }, S.noteTitles.get(name) || noteTitle(name));
}

// noteTitle makes a memory note's file name readable: the date and chat
// prefix and .md go.
export function noteTitle(name) {
  const t = String(name).replace(/\.md$/, '').replace(/^\d{4}-\d{2}-\d{2}-c_[0-9a-zA-Z]+-/, '').replace(/-/g, ' ');
  return t || name;
}

export function boundaryItem(v, e) {
  const open = v.expanded.has(e.key);
  const recId = `record-${e.seq}`;
  return {
    key: e.key,
    sig: JSON.stringify(['boundary', e.rev, open, e.record.length]),
    render(el) {
      el.className = 'boundary';
      el.dataset.boundary = String(e.seq);
      el.dataset.reason = e.reason || '';
      el.dataset.continued = String(Boolean(e.continued));
      el.setAttribute('role', 'group');
      el.setAttribute('aria-label', 'Conversation boundary');
      const why = e.reason === 'hard' ? 'Hard limit reached' : e.reason === 'assistant' ? 'The assistant consolidated' : 'Consolidated';
      const then = e.continued ? 'the work carried on from the record below' : 'the conversation ended here and waits for you';
      const line = h('div', { class: 'boundary-line', role: 'separator' },
        h('span', { class: 'boundary-title' }, h('span', { class: 'boundary-icon', 'aria-hidden': 'true' }), 'Conversation archived and cleared'));
      const summary = h('p', { class: 'boundary-summary' }, h('strong', null, why), ' — ', then, '.');
      const parts = [summary];
      if (e.why) parts.push(h('p', { class: 'boundary-why' }, e.why));
      const notes = Array.isArray(e.notes) ? e.notes : [];
      if (notes.length) {
        const list = h('span', { class: 'boundary-notes-list' });
        notes.forEach((n, i) => {
          if (i) list.append(', ');
          list.append(noteLink(n));
        });
        parts.push(h('p', { class: 'boundary-notes' }, `Memory ${notes.length === 1 ? 'note' : 'notes'} written: `, list));
      }
      const toggle = h('button', { class: 'toggle-record btn btn-ghost btn-sm', type: 'button', 'aria-expanded': String(open), 'aria-controls': recId },
        open ? 'Hide the handoff record' : 'Show the handoff record');
      parts.push(h('div', { class: 'boundary-actions' }, toggle));
      const rec = h('div', { class: 'record md', id: recId });
      rec.hidden = !open;
      if (open) rec.append(renderMarkdown(e.record || '(no record)'));
      parts.push(rec);
      el.replaceChildren(line, h('div', { class: 'boundary-card' }, ...parts));
    },
  };
}

// continuityItem shows the message the runtime opened the fresh
// conversation with as a runtime note: its opening in full, the record it
// carries behind a toggle.
export function continuityItem(v, m) {
  const key = `n:${m.id}`;
  const open = v.expanded.has(key);
  const text = String(m.text || '');
  const cut = text.search(/^# /m);
  const intro = cut > 0 ? text.slice(0, cut) : text;
  const rest = cut > 0 ? text.slice(cut) : '';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['cont', oid(m), open]),
    render(el) {
      el.className = 'msg runtime-note';
      el.dataset.message = m.id;
      el.dataset.state = 'continuity';
      el.removeAttribute('data-mode');
      el.removeAttribute('data-client-id');
      const card = h('div', { class: 'runtime-card', role: 'note', 'aria-label': 'Runtime note' });
      card.append(h('p', { class: 'runtime-label' }, h('span', { class: 'runtime-icon', 'aria-hidden': 'true' }), 'Runtime note · the fresh conversation opened with this'));
      const md = h('div', { class: 'md' });
      md.append(renderMarkdown(intro));
      card.append(md);
      if (rest) {
        const id = `cont-${m.id}`;
        card.append(h('button', { class: 'toggle-record btn btn-ghost btn-sm', type: 'button', 'aria-expanded': String(open), 'aria-controls': id },
          open ? 'Hide the record it carries' : 'Show the record it carries'));
        const full = h('div', { class: 'record md', id });
        full.hidden = !open;
        if (open) full.append(renderMarkdown(rest));
        card.append(full);
      }
      el.replaceChildren(h('div', { class: 'col' }, card));
    },
  };
}

export function approvalItem(v, id, a) {
  return {
    key: `a:${id}`,
    sig: JSON.stringify(['appr', a, Boolean(a._answering)]),
    render(el) {
      el.className = 'card approval';
      el.dataset.approval = id;
      // APPROVAL: {id, call: CALL, tool, turn, requested_at, change?}.
      const tool = a.tool || a.call?.name || 'a tool';
      const parts = [h('p', { class: 'card-title' }, 'Permission needed'), h('p', null, 'The assistant wants to use ', h('code', null, String(tool)), '.')];
      parts.push(approvalDetail(a));
      parts.push(h('div', { class: 'card-actions' },
        h('button', { class: 'deny btn btn-ghost btn-sm', type: 'button', disabled: Boolean(a._answering) }, 'Deny'),
        allowChatButton(a, a._answering),
        h('button', { class: 'allow btn btn-primary btn-sm', type: 'button', disabled: Boolean(a._answering) }, 'Allow')));
      el.replaceChildren(...parts);
    },
  };
}

export function recoveryItem(v, id, r) {
  return {
    key: `r:${id}`,
    sig: JSON.stringify(['rec', r, Boolean(r._answering), Boolean(r._held)]),
    render(el) {
      el.className = 'card recovery';
      el.dataset.recovery = id;
      // RECOVERY: {id, call: CALL, turn, created_at, process?}.
      const tool = r.call?.name || 'a tool call';
      const parts = [h('p', { class: 'card-title' }, 'A tool call was interrupted'),
        h('p', null, h('code', null, String(tool)), ' was running when the connection or the process went away. Repeat it, or skip it and carry on?')];
      // What the gateway found of the call's process when it came back.
      if (r.process === 'stopped') parts.push(h('p', { class: 'card-text' }, 'Its process was still running when the gateway came back; it was stopped, so a repeat does not run beside it.'));
      else if (r.process === 'ended') parts.push(h('p', { class: 'card-text' }, 'Its process was no longer running when the gateway came back.'));
      if (r._held) parts.push(h('p', { class: 'notice wait' }, 'Your answer is held until this conversation is back.'));
      parts.push(h('div', { class: 'card-actions' },
        h('button', { class: 'skip btn btn-ghost btn-sm', type: 'button', disabled: Boolean(r._answering) }, 'Skip'),
        h('button', { class: 'repeat btn btn-primary btn-sm', type: 'button', disabled: Boolean(r._answering) }, 'Repeat')));
      el.replaceChildren(...parts);
    },
  };
}
