// Desktop notifications, opt-in: a reply finished, an approval (or a
// recovery answer) is needed, a turn failed — for chats in the background
// only, never for the chat in view while the tab is visible. They are off
// until the person turns them on in Settings; the browser's permission is
// asked for then, from that click (a user gesture), never before. What
// happened is read from the chat list's entries (state, waiting, outcome),
// which chat.updated keeps current for every chat, open or not.
//
// DOM contract (browser tests rely on it):
//   #notify-toggle     the checkbox in Settings → Chat; checked while on
//   #notify-status     its status line (why it is off, when refused)

const KEY = 'mirror.notify';

// supported says the browser has the Notification API.
function supported() {
  return typeof window !== 'undefined' && 'Notification' in window;
}

// on says notifications are wanted and allowed.
export function on() {
  try {
    return supported() && localStorage.getItem(KEY) === 'on' && Notification.permission === 'granted';
  } catch {
    return false;
  }
}

// transition is what a change of chat entry before → after is worth
// saying: 'approval', 'recovery', 'finished', 'error', or null. A stopped
// turn says nothing: the person stopped it.
export function transition(before, after) {
  if (!before || !after) return null;
  if (after.waiting && after.waiting !== before.waiting) return after.waiting === 'recovery' ? 'recovery' : 'approval';
  if (before.state === 'running' && after.state !== 'running') {
    if (after.outcome === 'failed') return 'error';
    if (after.outcome === 'ok') return 'finished';
  }
  return null;
}

const WORDS = {
  finished: 'Reply finished',
  approval: 'Approval needed: a tool call waits for Allow or Deny',
  recovery: 'Answer needed: an interrupted tool call waits for repeat or skip',
  error: 'The reply failed',
};

// inView says chat id is the one on screen in a visible tab.
function inView(id) {
  let cur = null;
  try {
    cur = decodeURIComponent(location.hash.replace(/^#/, '')) || null;
  } catch {
    cur = null;
  }
  return document.visibilityState === 'visible' && cur === id;
}

function show(c, what) {
  const n = new Notification((c.title && String(c.title).trim()) || 'New chat', {
    body: WORDS[what], tag: `mirror-${c.id}`, renotify: true,
  });
  n.onclick = () => {
    window.focus();
    location.hash = '#' + encodeURIComponent(c.id);
    n.close();
  };
}

let seen = null; // chat id → {state, waiting, outcome}, as the last list said

const page = typeof document !== 'undefined'; // not under node's tests

if (page) document.addEventListener('mirror:chats', (e) => {
  const list = Array.isArray(e.detail) ? e.detail : [];
  const now = new Map(list.map((c) => [c.id, { state: c.state, waiting: c.waiting || '', outcome: c.outcome || '' }]));
  if (seen && on()) {
    for (const c of list) {
      const what = transition(seen.get(c.id), now.get(c.id));
      if (what && !inView(c.id)) show(c, what);
    }
  }
  seen = now;
});

// section is the Settings block with the toggle; h is the page's element
// helper.
export function section(h) {
  const want = (() => {
    try {
      return localStorage.getItem(KEY) === 'on';
    } catch {
      return false;
    }
  })();
  let status = '';
  if (!supported()) status = 'This browser cannot show notifications.';
  else if (want && Notification.permission === 'denied') status = 'The browser blocks notifications for this page: allow them in its site settings.';
  const box = h('input', { type: 'checkbox', id: 'notify-toggle', 'aria-describedby': 'notify-status' });
  box.checked = want && supported() && Notification.permission === 'granted';
  box.disabled = !supported();
  return h('section', { class: 'notify-settings', 'aria-labelledby': 'notify-title' },
    h('h3', { id: 'notify-title', class: 'compaction-title' }, 'Notifications'),
    h('div', { class: 'notify-row' }, box,
      h('label', { for: 'notify-toggle' }, 'Desktop notifications for chats in the background: a reply finished, an approval needed, an error')),
    h('p', { id: 'notify-status', class: 'fact-hint', role: 'status' }, status));
}

// The toggle's change is the person's click: the one moment the browser
// is asked for its permission.
if (page) document.addEventListener('change', async (e) => {
  const box = e.target;
  if (!(box instanceof HTMLInputElement) || box.id !== 'notify-toggle') return;
  const status = document.getElementById('notify-status');
  const say = (t) => { if (status) status.textContent = t; };
  if (!box.checked) {
    try { localStorage.removeItem(KEY); } catch { /* private mode: nothing kept */ }
    say('Off.');
    return;
  }
  if (!supported()) {
    box.checked = false;
    say('This browser cannot show notifications.');
    return;
  }
  let p = Notification.permission;
  if (p === 'default') {
    try {
      p = await Notification.requestPermission();
    } catch {
      p = 'denied';
    }
  }
  if (p !== 'granted') {
    box.checked = false;
    say('The browser did not allow notifications: allow them in its site settings, then try again.');
    return;
  }
  try { localStorage.setItem(KEY, 'on'); } catch { /* private mode: on for this page only */ }
  say('On: chats in the background notify you.');
});
