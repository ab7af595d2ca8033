// Per-message actions and marks: Copy (the message's Markdown source),
// Regenerate (message.regenerate: the question queued again as a new
// message; the first answer stays), Edit & resend (the text back in the
// message box; sending makes a new message, the old stays), and which model
// wrote an answer, a fallback marked (MESSAGE.model, MESSAGE.fallback).
//
// DOM contract (browser tests rely on it):
//   .msg-menu button.copy-message | button.regenerate | button.resend   the menu's items (a code
//                                                              block's own copy button is button.copy)
//   .msg .meta .model-mark[data-model=NAME]                    who answered; .fallback when
//                                                              a later model of the chain did
//   .msg.user .regen-mark                                      a message asked again (regenerates)
//   document.body[data-copied]                                 the last text Copy put on the
//                                                              clipboard, by its length (tests)

import { el } from './dom.js';
import { dom } from './page.js';
import { render, toast } from './render.js';
import { request } from './socket.js';
import { S, uuid } from './state.js';

// modelMark says which model wrote assistant message m; null when unknown.
export function modelMark(m) {
  if (m?.role !== 'assistant' || typeof m.model !== 'string' || !m.model) return null;
  const fb = m.fallback === true;
  return el('span', {
    class: 'model-mark' + (fb ? ' fallback' : ''), 'data-model': m.model,
    title: fb ? `Answered by ${m.model}, a fallback: the chain's first model failed or did not fit` : `Answered by ${m.model}`,
  }, m.model, fb ? el('span', { class: 'fallback-tag' }, 'fallback') : null);
}

// regenMark marks a user message that asks an earlier one again.
export function regenMark(m) {
  if (m?.role !== 'user' || typeof m.regenerates !== 'string' || !m.regenerates) return null;
  return el('span', { class: 'regen-mark', title: 'This question was asked again (Regenerate); both answers are kept' }, 'Asked again');
}

// questionOf is the user message whose turn wrote m (an answer) or m itself
// (a person's message a turn picked up); '' when there is none to ask again.
export function questionOf(messages, m) {
  if (!m) return '';
  if (m.role === 'user') return m.state === 'picked' || m.state === 'done' ? m.id : '';
  if (m.role !== 'assistant' || !m.turn) return '';
  const q = messages.find((x) => x.role === 'user' && x.turn === m.turn && (x.state === 'picked' || x.state === 'done'));
  return q ? q.id : '';
}

// menuItems are the message menu's items for m: Copy always, Regenerate
// when a question can be asked again, Edit & resend for a person's message.
export function menuItems(messages, m) {
  const items = [el('button', { class: 'copy-message', type: 'button', role: 'menuitem' }, 'Copy')];
  if (questionOf(messages, m)) items.push(el('button', { class: 'regenerate', type: 'button', role: 'menuitem' }, 'Regenerate'));
  if (m?.role === 'user' && m.text) items.push(el('button', { class: 'resend', type: 'button', role: 'menuitem' }, 'Edit & resend'));
  return items;
}

// copyText puts text on the clipboard; it resolves true when it did. A
// page without the async clipboard (no secure context) uses a hidden
// textarea and the copy command.
export async function copyText(text) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    const ta = el('textarea', { class: 'copy-buffer', 'aria-hidden': 'true', readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    ta.remove();
  }
  if (ok) document.body.dataset.copied = String(text.length);
  return ok;
}

// resend puts text in the message box, ready to edit and send as a new
// message, with the caret at its end.
export function resend(input, text) {
  input.value = text;
  input.dispatchEvent(new Event('input', { bubbles: true }));
  const place = () => {
    input.focus();
    input.setSelectionRange(text.length, text.length);
  };
  place();
  // Again after the frame: the menu that just closed may have queued a
  // focus of its own for that frame.
  requestAnimationFrame(place);
}

// messageAction does what a menu item of message id of view v asks (Copy,
// Regenerate, Edit & resend); false when btn is none of them.
export function messageAction(v, id, btn) {
  const kind = ['copy-message', 'regenerate', 'resend'].find((k) => btn.classList.contains(k));
  if (!kind) return false;
  const m = v.index.get(id)?.m;
  S.menu = null;
  if (!m) {
    render();
    return true;
  }
  if (kind === 'copy-message') {
    copyText(m.text || '').then((ok) => toast(ok ? 'Copied.' : 'Could not copy: the browser refused the clipboard.'));
  } else if (kind === 'resend') {
    render(); // the menu goes first, so nothing takes the focus back from the box
    resend(dom.input, m.text || '');
    return true;
  } else {
    const q = questionOf(v.history.filter((e) => e.kind === 'msg').map((e) => e.m), m);
    if (q && !request({ type: 'message.regenerate', chat: v.id, message: q, client_id: uuid() }, { kind: 'regenerate', chat: v.id, message: q })) {
      toast('Not connected — try again in a moment.');
    }
  }
  render();
  return true;
}
