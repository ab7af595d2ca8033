// Mirror browser client: the key bindings (Enter sends or saves, Shift+Enter
// breaks the line, Escape cancels an edit or closes the menu or sidebar).

import { cancelEdit, closeMenu, saveEdit } from './actions.js';
import { closeSidebar } from './nav.js';
import { dom } from './page.js';
import { openPanel } from './panels.js';
import { currentView, S } from './state.js';

// An Enter that sent or saved must not also insert a line break: some input
// paths (synthetic key events, some IMEs) deliver the character separately
// from the keydown whose default was prevented.
let swallowNewline = false;

function swallowEnter(e) {
  if (swallowNewline && (e.inputType === 'insertLineBreak' || e.inputType === 'insertParagraph')) {
    e.preventDefault();
  }
  swallowNewline = false;
}

// bindKeys adds the page's key handlers (bind, in bindings.js, the rest).
export function bindKeys() {
  dom.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      swallowNewline = true;
      dom.composer.requestSubmit();
    }
  });
  dom.input.addEventListener('beforeinput', swallowEnter);
  dom.context.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' && e.key !== ' ') return;
    e.preventDefault();
    openPanel('model');
  });
  dom.messages.addEventListener('keydown', (e) => {
    const ta = e.target;
    if (ta.tagName !== 'TEXTAREA') return;
    const msg = ta.closest('[data-message]');
    const v = currentView();
    if (!v || !msg) return;
    if (e.key === 'Escape') {
      e.preventDefault();
      cancelEdit(v, msg.dataset.message);
      dom.input.focus();
    } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      swallowNewline = true;
      saveEdit(v, msg.dataset.message, ta.value);
    }
  });
  dom.messages.addEventListener('beforeinput', swallowEnter);
  document.addEventListener('keyup', () => (swallowNewline = false), true);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && S.menu) {
      e.preventDefault();
      closeMenu(true);
      return;
    }
    if (e.key === 'Escape' && dom.app.dataset.sidebar === 'open') {
      closeSidebar();
      dom.menu.focus();
    }
  });
}
