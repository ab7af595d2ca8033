// The rest of the chat list, loaded as it scrolls into view. welcome lists
// the most recently updated chats and, when there are more, a cursor
// (welcome.next); each further page comes from GET /api/chats?limit&after,
// which the server reads from its index by last update, so a long list
// costs one page at a time.
//
// DOM contract (browser tests rely on it):
//   #chat-list-more   a button after #chat-list while more chats exist;
//                     loads the next page when it scrolls into view or
//                     is pressed; hidden once every chat is listed

const PAGE = 100;

const pager = { next: null, gen: 0, loading: false, button: null, observer: null, append: null };

// pageChats starts paging after a welcome: list is #chat-list, next the
// welcome's cursor, append(chats) adds a page below the chats listed.
export function pageChats(list, next, append) {
  pager.gen++;
  pager.next = typeof next === 'string' && next ? next : null;
  pager.append = append;
  pager.loading = false;
  if (!pager.button) {
    const b = document.createElement('button');
    b.type = 'button';
    b.id = 'chat-list-more';
    b.className = 'chat-list-more';
    b.textContent = 'More chats';
    b.addEventListener('click', () => loadMore());
    list.after(b);
    pager.button = b;
    if ('IntersectionObserver' in window) {
      pager.observer = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) loadMore();
      });
    }
  }
  show();
}

function show() {
  const b = pager.button;
  b.hidden = !pager.next;
  if (!pager.observer) return;
  // Observing again reports the button's current visibility: a page that
  // left it in view loads the next one.
  pager.observer.unobserve(b);
  if (pager.next) pager.observer.observe(b);
}

async function loadMore() {
  if (!pager.next || pager.loading) return;
  const gen = pager.gen;
  pager.loading = true;
  pager.button.disabled = true;
  try {
    const r = await fetch(`/api/chats?limit=${PAGE}&after=${encodeURIComponent(pager.next)}`,
      { credentials: 'same-origin', cache: 'no-store', redirect: 'manual' });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const page = await r.json();
    if (gen !== pager.gen) return; // a new welcome started over
    pager.next = typeof page.next === 'string' && page.next ? page.next : null;
    pager.append(Array.isArray(page.chats) ? page.chats : []);
  } catch {
    // Left as it is: the button stays, a press or the next scroll retries.
  } finally {
    if (gen === pager.gen) {
      pager.loading = false;
      pager.button.disabled = false;
      show();
    }
  }
}
