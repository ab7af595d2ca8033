// The open chat's chain of models, chosen in the header. The chains are
// runtime.yaml's (GET /api/chains); choosing one PATCHes the chat
// ({"chain"}, docs/protocol.md "Managing chats"); the next turn asks it,
// a running one keeps its own. The list learns the change from
// chat.updated, like every other tab.
//
// DOM contract (browser tests rely on it):
//   #chain-pick        <select> in the header, one option per chain
//                      (value = its name); hidden with no chat open or
//                      a single chain; shows the open chat's chain
//   #chain-error       role=alert beside it when a choice was refused

import { $, el } from './dom.js';

const pick = el('select', { id: 'chain-pick', class: 'chain-pick', 'aria-label': 'Model chain of this chat', hidden: true });
const error = el('span', { id: 'chain-error', class: 'chain-error', role: 'alert', hidden: true });
const anchor = $('model-open');
anchor?.before(pick, error);

let chains = null; // [{name, models, roles}] once read
let roles = {};
let list = [];
let loading = null;
let saving = false;

function current() {
  try {
    return decodeURIComponent(location.hash.replace(/^#/, '')) || null;
  } catch {
    return null;
  }
}

async function load() {
  if (chains || loading) return loading;
  loading = (async () => {
    try {
      const r = await fetch('/api/chains', { credentials: 'same-origin', cache: 'no-store' });
      if (!r.ok) return;
      const body = await r.json();
      chains = Array.isArray(body.chains) ? body.chains.filter((c) => c && typeof c.name === 'string') : [];
      roles = body.roles || {};
    } catch {
      chains = null;
    } finally {
      loading = null;
    }
    sync();
  })();
  return loading;
}

// label names a chain by its models in the order they are tried.
function label(c) {
  const models = Array.isArray(c.models) ? c.models : [];
  return models.length && !(models.length === 1 && models[0] === c.name) ? `${c.name} (${models.join(' → ')})` : c.name;
}

function sync() {
  const id = current();
  const c = id ? list.find((x) => x.id === id) : null;
  const show = !!c && !c.delete_at && Array.isArray(chains) && chains.length > 1;
  pick.hidden = !show;
  if (!show) {
    error.hidden = true;
    return;
  }
  const want = c.chain || roles.chat || '';
  const names = chains.map((x) => x.name).join('\n');
  if (pick.dataset.names !== names) {
    pick.replaceChildren(...chains.map((x) => el('option', { value: x.name }, label(x))));
    pick.dataset.names = names;
  }
  if (!saving && pick.value !== want) pick.value = want;
  pick.dataset.chat = id;
  const chosen = chains.find((x) => x.name === want);
  pick.title = chosen ? `This chat asks ${chosen.models.join(', then ')}; the next turn uses the chain chosen here.` : '';
}

pick.addEventListener('change', async () => {
  const id = pick.dataset.chat;
  const chain = pick.value;
  if (!id) return;
  saving = true;
  pick.disabled = true;
  error.hidden = true;
  try {
    const r = await fetch(`/api/chats/${encodeURIComponent(id)}`, {
      method: 'PATCH', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ chain }),
    });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || `the gateway answered ${r.status}`);
    const i = list.findIndex((x) => x.id === id);
    if (i >= 0 && body.chat) list[i] = { ...list[i], ...body.chat };
  } catch (e) {
    error.textContent = `The chain was not changed: ${e.message}`;
    error.hidden = false;
  } finally {
    saving = false;
    pick.disabled = false;
    sync();
  }
});

document.addEventListener('mirror:chats', (e) => {
  list = Array.isArray(e.detail) ? e.detail : [];
  if (!chains) load();
  sync();
});
window.addEventListener('hashchange', sync);
