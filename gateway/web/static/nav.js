// Mirror browser client: the chat in the URL hash, and the sidebar on
// narrow screens.

import { dom } from './page.js';

export function hashChat() {
  const raw = location.hash.replace(/^#/, '');
  if (!raw) return null;
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

export function setHash(id) {
  const want = id ? '#' + encodeURIComponent(id) : '';
  if (location.hash === want || (!id && !location.hash)) return;
  if (id) location.hash = want;
  else history.replaceState(null, '', location.pathname + location.search);
}

export function openSidebar() {
  dom.app.dataset.sidebar = 'open';
  dom.menu.setAttribute('aria-expanded', 'true');
  dom.backdrop.hidden = false;
  const active = dom.list.querySelector('.chat-item.active .chat-link') || dom.newChat;
  active.focus();
}

export function closeSidebar() {
  if (dom.app.dataset.sidebar !== 'open') return;
  dom.app.dataset.sidebar = 'closed';
  dom.menu.setAttribute('aria-expanded', 'false');
  dom.backdrop.hidden = true;
}
