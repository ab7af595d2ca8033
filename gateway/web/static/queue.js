// Mirror browser client: the queued messages (pending, editable) and the
// outbox's bubbles under the conversation.

import { el as h } from './dom.js';
import { attachmentsEl, attachmentsSig } from './media.js';
import { autosize, render } from './render.js';
import { S } from './state.js';
import { noticeEls } from './transcript.js';

export function hasOutbox(chat) {
  return S.outbox.some((e) => e.chat === chat);
}

export function pendingItem(v, m) {
  const ed = v.editing.get(m.id);
  const busy = v.busy.get(m.id) || '';
  const mode = m.mode === 'redirect' ? 'redirect' : 'queue';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['pending', m.text, mode, busy, ed ? [ed.saving, ed.picked, ed.error] : null, v.notices.get(m.id) || '', v.errors.get(m.id) || '', attachmentsSig(m)]),
    render(el) {
      el.className = 'msg pending' + (ed ? ' editing' : '') + (busy ? ' ' + busy : '');
      el.dataset.message = m.id;
      el.dataset.mode = mode;
      el.dataset.state = ed && ed.picked ? 'picked' : 'pending';
      el.removeAttribute('data-turn');
      el.removeAttribute('aria-busy');
      el.removeAttribute('data-client-id');
      const label = mode === 'redirect' ? 'Steering · waits for the next tool step' : 'Queued';
      if (ed) {
        // Keep the column, its box and the textarea in place across renders:
        // moving a focused textarea would lose its focus and caret.
        let col = el.querySelector(':scope > .col.edit-col');
        let ta = col && col.querySelector(':scope > .edit-box > textarea');
        if (!ta) {
          ta = h('textarea', { rows: '2', 'aria-label': 'Edit queued message' });
          ta.value = ed.draft;
          col = h('div', { class: 'col edit-col' }, h('div', { class: 'bubble edit-box' }, ta));
          el.replaceChildren(col);
        }
        for (const c of [...col.children]) if (!c.classList.contains('edit-box')) c.remove();
        ta.disabled = ed.saving;
        const bar = h('div', { class: 'pending-bar' },
          h('span', { class: 'pending-label' }, ed.saving ? 'Saving…' : 'Editing'),
          h('span', { class: 'spacer' }),
          h('button', { class: 'cancel btn btn-ghost btn-sm', type: 'button', disabled: ed.saving }, 'Cancel'),
          h('button', { class: 'save btn btn-primary btn-sm', type: 'button', disabled: ed.saving }, 'Save'));
        col.append(bar, ...noticeEls(v, m.id));
        if (ed.error) col.append(h('p', { class: 'notice error', role: 'alert' }, ed.error));
        autosize(ta);
        if (ed.focus) {
          ed.focus = false;
          requestAnimationFrame(() => {
            ta.focus();
            ta.setSelectionRange(ta.value.length, ta.value.length);
          });
        }
        return;
      }
      const bar = h('div', { class: 'pending-bar' },
        h('span', { class: 'pending-label' }, h('span', { class: 'clock', 'aria-hidden': 'true' }), busy === 'deleting' ? 'Deleting…' : label),
        h('span', { class: 'spacer' }),
        h('button', { class: 'edit btn btn-ghost btn-sm', type: 'button', disabled: Boolean(busy), 'aria-label': 'Edit queued message' }, 'Edit'),
        h('button', { class: 'delete btn btn-ghost btn-sm', type: 'button', disabled: Boolean(busy), 'aria-label': 'Delete queued message' }, 'Delete'));
      const bubble = h('div', { class: 'bubble' }, m.text || !m.attachments?.length ? h('div', { class: 'text' }, m.text || '') : null,
        attachmentsEl(m, { removable: true, busy: Boolean(busy) }));
      el.replaceChildren(h('div', { class: 'col' }, bubble, bar, ...noticeEls(v, m.id)));
    },
  };
}

export function outboxItem(e) {
  const waiting = !S.connected;
  return {
    key: `o:${e.client_id}`,
    sig: JSON.stringify(['outbox', e.text, e.error, waiting, attachmentsSig(e)]),
    render(el) {
      el.className = 'msg outbox' + (e.error ? ' failed' : '');
      el.dataset.clientId = e.client_id;
      el.removeAttribute('data-message');
      const bar = h('div', { class: 'pending-bar' });
      if (e.error) {
        bar.append(h('span', { class: 'pending-label' }, 'Not sent'), h('span', { class: 'spacer' }),
          h('button', { class: 'discard btn btn-ghost btn-sm', type: 'button' }, 'Discard'),
          h('button', { class: 'retry btn btn-ghost btn-sm', type: 'button' }, 'Retry'));
      } else {
        bar.append(h('span', { class: 'pending-label' }, h('span', { class: 'spinner sm', 'aria-hidden': 'true' }), waiting ? 'Waiting for the connection…' : 'Sending…'));
      }
      const col = h('div', { class: 'col' }, h('div', { class: 'bubble' }, e.text ? h('div', { class: 'text' }, e.text) : null, attachmentsEl(e)), bar);
      if (e.error) col.append(h('p', { class: 'notice error', role: 'alert' }, e.error));
      el.replaceChildren(col);
    },
  };
}
