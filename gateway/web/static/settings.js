// Settings: the Chat view (the open chat's model, its soft and hard limits
// and the current reading) and the Chains view (each chain, its models in
// order, each model's last reported quota, local usage and any wait), as
// seed 001 places them. The views are built from what GET /api/chains,
// /api/models and /api/quotas answer; app.js fetches and shows them in
// #panel.
//
// DOM contract (browser tests rely on it):
//   #settings-open                opens #panel on Settings
//   .settings[data-tab=chat|chains]  the view; button.settings-tab[data-tab]
//                                 switches (aria-selected on the shown one)
//   .settings-chat[data-model=NAME]  dd[data-field=chain|model|soft|hard|
//                                 reading] hold the values; button.open-model opens
//                                 the model details where soft and hard are moved
//   .chain[data-chain=NAME]       one chain; .chain-model[data-model=NAME] each model
//                                 in order; .quota-row[data-key=FINGERPRINT] one key's
//                                 dd[data-field=quota|usage|wait]
//   #notify-toggle                under the Chat view: desktop notifications
//                                 (notify.js)

import { quotaFacts, quotasOf } from './quota.js';
import { section as notifySection } from './notify.js';

// TABS are the views in the order the tabs show them.
export const TABS = [['chat', 'Chat'], ['chains', 'Chains']];

function facts(h, cls, rows) {
  const dl = h('dl', { class: 'model-facts ' + cls });
  for (const [field, label, value, hint] of rows) {
    dl.append(h('div', { class: 'model-fact' },
      h('dt', null, label),
      h('dd', { 'data-field': field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
  }
  return dl;
}

const tokens = (n) => `${(Number(n) || 0).toLocaleString()} tokens`;
const pct = (r) => String(Math.round((Number(r) || 0) * 1000) / 10);

// settingsView is the whole panel body: the tabs and the view of tab.
// data: {chains, roles, models, quotas, chat, reading}; chat is the open
// chat ({id, title, chain}) or null, reading its last context event.
export function settingsView(h, tab, data) {
  const tabs = h('div', { class: 'settings-tabs', role: 'tablist' });
  for (const [id, label] of TABS) {
    tabs.append(h('button', { type: 'button', class: 'settings-tab', role: 'tab', 'data-tab': id, 'aria-selected': String(id === tab) }, label));
  }
  const body = tab === 'chains' ? chainsView(h, data) : chatView(h, data);
  // Notifications are the page's, not a chat's: under the Chat view
  // whether a chat is open or not.
  return h('div', { class: 'settings', 'data-tab': tab }, tabs, body, tab === 'chains' ? null : notifySection(h));
}

// chatModelName is the model a chat's limits come from: the one its last
// reading names, else the first of its chain.
export function chatModelName(data) {
  if (data.reading?.model) return data.reading.model;
  const chain = (data.chains || []).find((c) => c.name === (data.chat?.chain || data.roles?.chat));
  return chain?.models?.[0] || null;
}

export function chatView(h, data) {
  if (!data.chat) return h('p', { class: 'panel-empty' }, 'Open a chat to see its limits.');
  const name = chatModelName(data);
  const m = (data.models || []).find((x) => x.name === name);
  const chain = data.chat.chain || data.roles?.chat || '';
  const wrap = h('div', { class: 'settings-chat', 'data-model': name || '' });
  wrap.append(h('p', { class: 'panel-intro' },
    'Both limits are counted on the conversation itself, after setting aside the fixed prompt and the tool definitions. ',
    'Soft: the assistant is told to finish its step and bring its handoff up to date. Hard: the conversation is written down and started fresh. Soft must stay below hard.'));
  const r = data.reading;
  let reading = 'no reading yet: the first request measures it';
  let hint = '';
  if (r && r.window > 0) {
    reading = `${tokens(r.used)} of the conversation`;
    hint = r.hard_reached ? 'past hard: the next request starts a boundary'
      : r.soft_reached ? 'past soft: the assistant is wrapping up its step'
        : `${tokens(Math.max(0, (r.soft || 0) - (r.used || 0)))} before soft`;
  }
  const rows = [
    ['chain', 'Chain', chain || '—', ''],
    ['model', 'Model', name || '—', m ? [m.provider, m.model].filter(Boolean).join(' · ') : ''],
  ];
  if (m) {
    rows.push(['soft', `Soft (${pct(m.soft_ratio)} %)`, tokens(r?.soft || m.soft), 'of the window, counted before every request']);
    rows.push(['hard', `Hard (${pct(m.hard_ratio)} %)`, tokens(r?.hard || m.hard), 'never above the checkpoint mark']);
  }
  rows.push(['reading', 'Now', reading, hint]);
  wrap.append(facts(h, 'settings-facts', rows));
  if (m) wrap.append(h('p', null, h('button', { type: 'button', class: 'btn btn-sm open-model', 'data-model': m.name }, 'Move soft and hard in the model details')));
  return wrap;
}

export function chainsView(h, data) {
  const wrap = h('div', { class: 'settings-chains' });
  wrap.append(h('p', { class: 'panel-intro' },
    'Models are tried in order. No tokens-per-minute value is configured: each quota is the last one the provider reported, with this backend\'s local usage of its one-minute window. ',
    'Observations expire, so a raised quota is found without a restart; the last one reported stays shown here, across restarts too.'));
  const models = new Map((data.models || []).map((m) => [m.name, m]));
  const chains = data.chains || [];
  if (!chains.length) wrap.append(h('p', { class: 'panel-empty' }, 'No chains could be read.'));
  for (const c of chains) {
    const sec = h('section', { class: 'chain', 'data-chain': c.name });
    const roles = (c.roles || []).length ? ` · used by ${c.roles.join(', ')}` : '';
    sec.append(h('h3', { class: 'chain-title' }, c.name, h('span', { class: 'fact-hint' }, roles)));
    const ol = h('ol', { class: 'chain-models' });
    for (const name of c.models || []) {
      const m = models.get(name);
      const li = h('li', { class: 'chain-model', 'data-model': name },
        h('span', { class: 'item-title' }, name),
        h('span', { class: 'item-meta' }, m ? [m.provider, m.model].filter(Boolean).join(' · ') : 'not in /api/models'));
      const rows = m ? quotasOf(data.quotas, m) : [];
      if (!rows.length) {
        li.append(h('p', { class: 'fact-hint quota-none' }, 'No quota reported yet: requests go at once until the provider reports one.'));
      }
      for (const q of rows) {
        const div = h('div', { class: 'quota-row', 'data-key': q.fingerprint || '' });
        if (rows.length > 1) div.append(h('span', { class: 'fact-hint' }, `API key ${q.fingerprint || '(none)'}`));
        div.append(facts(h, 'quota-facts', quotaFacts(q)));
        li.append(div);
      }
      ol.append(li);
    }
    sec.append(ol);
    wrap.append(sec);
  }
  return wrap;
}
