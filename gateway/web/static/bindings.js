// Mirror browser client: what each click, submit and scroll does (the
// keys are in keys.js).

import { answerApproval, answerRecovery, cancelEdit, closeMenu, createChat, deleteMessage, isCommand, loadOlder, pinMessage, removeAttachment, saveEdit, selectChat, sendMessage, showCommandHints, startEdit, stopTurn, toggleExpanded, toggleMenu, transmit } from './actions.js';
import { allowForChat } from './approvals.js';
import { initAttach } from './attach.js';
import { bindKeys } from './keys.js';
import { messageAction } from './message-actions.js';
import { closeSidebar, hashChat, openSidebar, setHash } from './nav.js';
import { dom } from './page.js';
import { closePanel, drawModel, openPanel, panel, previewText, setCompaction, setContextLimit, showMemory, showModel, showNote, showSettings } from './panels.js';
import { startTicker } from './quota.js';
import { num } from './reducer.js';
import { autosize, render, toast } from './render.js';
import { reconnectNow } from './socket.js';
import { currentView, S, saveOutbox } from './state.js';

export function bind() {
  bindKeys();
  dom.newChat.addEventListener('click', () => {
    createChat(null);
    closeSidebar();
  });

  dom.list.addEventListener('click', (e) => {
    const item = e.target.closest('.chat-item');
    if (item && item.dataset.chat) selectChat(item.dataset.chat);
  });

  const files = initAttach({ form: dom.composer, input: dom.input, onChange: render, chat: () => S.current });
  dom.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = dom.input.value.trim();
    if (!text && !files.count()) {
      // Send on an empty box starts what a Stop held (notes.js says so).
      const c = S.current ? S.chats.get(S.current) : null;
      if (c && c.paused && num(c.pending, 0) > 0) sendMessage(S.current, '/continue', 'queue', []);
      return;
    }
    if (files.busy()) return files.afterUploads(() => dom.composer.requestSubmit());
    // A command leaves the attached files for the next message.
    sendMessage(S.current, text, S.redirect ? 'redirect' : 'queue', isCommand(text) !== false ? [] : files.take());
    dom.input.value = '';
    showCommandHints();
    if (S.current) S.drafts.delete(S.current);
    S.redirect = false;
    autosize(dom.input);
    dom.input.focus();
    render();
  });

  dom.input.addEventListener('input', () => {
    autosize(dom.input);
    showCommandHints();
  });
  dom.commandHints?.addEventListener('click', (e) => {
    const b = e.target.closest('button.command-hint');
    if (!b) return;
    const c = (S.commands || []).find((x) => x.name === b.dataset.command);
    dom.input.value = c && c.args ? `${c.name} ` : c ? c.name : '';
    autosize(dom.input);
    showCommandHints();
    dom.input.focus();
  });

  dom.stop.addEventListener('click', stopTurn);
  dom.mode.addEventListener('click', () => {
    S.redirect = !S.redirect;
    render();
    dom.input.focus();
  });

  dom.messages.addEventListener('click', (e) => {
    const link = e.target.closest('a.note-link');
    if (link && !e.ctrlKey && !e.metaKey && !e.shiftKey && e.button === 0) {
      e.preventDefault();
      openPanel('memory', link.dataset.note);
      return;
    }
    const btn = e.target.closest('button');
    if (!btn || btn.disabled) return;
    const v = currentView();
    if (btn.classList.contains('copy')) return copyCode(btn);
    if (!v) return;
    if (btn.classList.contains('toggle-record')) {
      const b = btn.closest('[data-boundary]');
      if (b) return toggleExpanded(v, `b:${b.dataset.boundary}`);
      const n = btn.closest('.runtime-note[data-message]');
      if (n) return toggleExpanded(v, `n:${n.dataset.message}`);
      return;
    }
    const msg = btn.closest('[data-message]');
    const id = msg && msg.dataset.message;
    if (id) {
      if (messageAction(v, id, btn)) return;
      if (btn.classList.contains('msg-menu-btn')) return toggleMenu(v, id);
      if (btn.classList.contains('pin')) return pinMessage(v, id);
      if (btn.classList.contains('edit')) return startEdit(v, id);
      if (btn.classList.contains('delete')) return deleteMessage(v, id);
      if (btn.classList.contains('save')) return saveEdit(v, id, msg.querySelector('textarea').value);
      if (btn.classList.contains('cancel')) return cancelEdit(v, id);
      if (btn.classList.contains('remove-attachment')) return removeAttachment(v, id, btn.dataset.sha256);
    }
    const ob = btn.closest('.msg.outbox');
    if (ob) {
      const i = S.outbox.findIndex((x) => x.client_id === ob.dataset.clientId);
      if (i < 0) return;
      if (btn.classList.contains('discard')) S.outbox.splice(i, 1);
      if (btn.classList.contains('retry')) {
        S.outbox[i].error = null;
        transmit(S.outbox[i]);
      }
      saveOutbox();
      return render();
    }
    const ap = btn.closest('.card.approval');
    if (ap && btn.classList.contains('allow-chat')) return allowForChat(v, ap.dataset.approval);
    if (ap) return answerApproval(v, ap.dataset.approval, btn.classList.contains('allow'));
    const rc = btn.closest('.card.recovery');
    if (rc) return answerRecovery(v, rc.dataset.recovery, btn.classList.contains('repeat') ? 'repeat' : 'skip');
  });

  // Right-click a message for its menu (unless text is selected, so the
  // browser's own menu still copies it).
  dom.messages.addEventListener('contextmenu', (e) => {
    const msg = e.target.closest('.msg.user[data-message], .msg.assistant[data-message]');
    const v = currentView();
    if (!msg || !v || msg.classList.contains('streaming') || String(getSelection() || '').trim()) return;
    if (!msg.querySelector('.msg-menu-btn')) return;
    e.preventDefault();
    S.menu = { chat: v.id, message: msg.dataset.message };
    render();
  });
  document.addEventListener('click', (e) => {
    if (S.menu && !e.target.closest('.msg-menu, .msg-menu-btn')) closeMenu(false);
  });
  dom.memoryOpen.addEventListener('click', () => {
    closeSidebar();
    openPanel('memory');
  });
  dom.handoffsOpen.addEventListener('click', () => {
    if (S.current) openPanel('handoffs', S.current);
  });
  dom.modelOpen.addEventListener('click', () => openPanel('model'));
  dom.settingsOpen.addEventListener('click', () => {
    closeSidebar();
    openPanel('settings');
  });
  startTicker(dom.messages);
  dom.context.addEventListener('click', () => openPanel('model'));
  dom.panel.addEventListener('submit', (e) => {
    const form = e.target.closest('.compaction-form');
    if (!form) return;
    e.preventDefault();
    setCompaction(form);
  });
  dom.panel.addEventListener('input', (e) => {
    const inp = e.target.closest('.compaction-input');
    if (!inp) return;
    // Both previews: a share of one moves what the other gives.
    const f = inp.form;
    if (!f) return;
    const share = (id) => Number(f.querySelector(`#${id}`)?.value) / 100;
    for (const [id, which] of [['soft-ratio', 'soft'], ['hard-ratio', 'hard']]) {
      const out = f.querySelector(`output[for="${id}"]`);
      if (out) out.textContent = previewText(num(Number(f.dataset.window), 0), share('soft-ratio'), share('hard-ratio'), num(Number(f.dataset.cap), 0), which);
    }
  });
  dom.panel.addEventListener('change', (e) => {
    const sel = e.target;
    if (sel.id === 'context-limit') return setContextLimit(sel.dataset.model, sel.value);
    if (sel.id === 'model-pick') {
      const m = panel.models?.find((x) => x.name === sel.value);
      if (m) drawModel(m);
    }
  });
  dom.panelClose.addEventListener('click', closePanel);
  dom.panelBack.addEventListener('click', () => showMemory());
  dom.panel.addEventListener('click', (e) => {
    if (e.target === dom.panel) return closePanel(); // the backdrop
    const item = e.target.closest('button.note-item');
    if (item) showNote(item.dataset.note);
    const tab = e.target.closest('button.settings-tab');
    if (tab) showSettings(tab.dataset.tab);
    const model = e.target.closest('button.open-model');
    if (model) {
      // Same dialog, so the focus still goes back to what opened Settings.
      panel.kind = 'model';
      showModel(model.dataset.model);
    }
  });
  dom.panel.addEventListener('close', () => {
    // The close event comes late: the panel may be open again meanwhile.
    if (!dom.panel.open) panel.opener?.focus?.();
  });

  dom.messages.addEventListener('input', (e) => {
    const ta = e.target;
    if (ta.tagName !== 'TEXTAREA') return;
    const msg = ta.closest('[data-message]');
    const v = currentView();
    const ed = v && msg && v.editing.get(msg.dataset.message);
    if (ed) ed.draft = ta.value;
    autosize(ta);
  });


  dom.scroller.addEventListener('scroll', () => {
    const sc = dom.scroller;
    S.stick = sc.scrollTop + sc.clientHeight >= sc.scrollHeight - 48;
    if (sc.scrollTop < 200) loadOlder();
  }, { passive: true });

  dom.toasts.addEventListener('click', (e) => {
    if (e.target.closest('.toast-close')) e.target.closest('.toast').remove();
  });

  dom.menu.addEventListener('click', () => (dom.app.dataset.sidebar === 'open' ? closeSidebar() : openSidebar()));
  dom.backdrop.addEventListener('click', closeSidebar);

  window.addEventListener('hashchange', () => {
    const id = hashChat();
    if (id && id !== S.current) {
      if (S.connected && !S.chats.has(id)) {
        toast('That chat was not found.');
        setHash(S.current);
        return;
      }
      selectChat(id);
    }
  });
  window.addEventListener('online', reconnectNow);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') reconnectNow();
  });
}

export async function copyCode(btn) {
  const code = btn.closest('.code-block')?.querySelector('code');
  if (!code) return;
  try {
    await navigator.clipboard.writeText(code.textContent);
    btn.textContent = 'Copied';
  } catch {
    const r = document.createRange();
    r.selectNodeContents(code);
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(r);
    btn.textContent = 'Selected';
  }
  setTimeout(() => (btn.textContent = 'Copy'), 1500);
}
