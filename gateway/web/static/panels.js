// Mirror browser client: the side panel (#panel): memory notes, past
// handoffs, settings, and the model details with the context settings.

import { chatToolsSection } from './approvals.js';
import { chatCostSection } from './cost.js';
import { el as h } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { dom } from './page.js';
import { modelQuotaSection } from './quota.js';
import { applyLimits, limitsFor } from './limits.js';
import { num } from './reducer.js';
import { chatName, render } from './render.js';
import { settingsView } from './settings.js';
import { getJSON, goLogin, putJSON, request } from './socket.js';
import { currentView, S } from './state.js';
import { noteTitle } from './transcript.js';

export const panel = { kind: null, note: null, chat: null, seq: 0, opener: null, models: null, quotas: null };

export function openPanel(kind, arg) {
  panel.kind = kind;
  panel.note = null;
  panel.chat = kind === 'handoffs' ? arg : null;
  panel.models = null;
  panel.opener = document.activeElement;
  if (!dom.panel.open) dom.panel.showModal();
  if (kind === 'memory') {
    if (arg) return showNote(arg, false);
    return showMemory();
  }
  if (kind === 'model') return showModel(arg);
  if (kind === 'settings') return showSettings(arg || 'chat');
  return showHandoffs(arg);
}

export function panelState(title, ...body) {
  dom.panelTitle.textContent = title;
  dom.panelBody.replaceChildren(...body);
  dom.panelBody.scrollTop = 0;
}

export function panelLoading(title) {
  dom.panelBack.hidden = true;
  panelState(title, h('p', { class: 'panel-empty' }, h('span', { class: 'spinner sm', 'aria-hidden': 'true' }), 'Loading…'));
  return ++panel.seq;
}

export async function showMemory() {
  const seq = panelLoading('Memory');
  const data = await getJSON('/api/memory');
  if (seq !== panel.seq || !dom.panel.open) return;
  const notes = data?.notes;
  if (!Array.isArray(notes)) return panelState('Memory', h('p', { class: 'panel-empty error' }, 'The memory notes could not be read.'));
  const intro = h('p', { class: 'panel-intro' }, 'What boundaries taught: each note was written when a long conversation was archived and cleared. The assistant reads them back with its memory tools.');
  if (!notes.length) return panelState('Memory', intro, h('p', { class: 'panel-empty' }, 'No memory notes yet.'));
  const list = h('ul', { class: 'panel-list' });
  for (const n of notes) {
    const chat = n.chat && S.chats.get(n.chat);
    list.append(h('li', null, h('button', { class: 'note-item', type: 'button', 'data-note': n.name },
      h('span', { class: 'item-title' }, n.title || n.name),
      h('span', { class: 'item-meta' }, [n.modified ? longTime(n.modified) : '', chat ? `from “${chatName(chat)}”` : '', fmtBytes(n.size)].filter(Boolean).join(' · ')))));
  }
  panelState('Memory', intro, list);
}

export async function showNote(name, back = true) {
  panel.note = name;
  const seq = panelLoading(noteTitle(name));
  let text = null;
  try {
    const r = await fetch(`/api/memory/${encodeURIComponent(name)}`, { credentials: 'same-origin', cache: 'no-store' });
    if (r.status === 401) return goLogin();
    if (r.ok) text = await r.text();
  } catch {
    text = null;
  }
  if (seq !== panel.seq || !dom.panel.open) return;
  dom.panelBack.hidden = !back;
  if (text == null) return panelState(noteTitle(name), h('p', { class: 'panel-empty error' }, 'That memory note was not found.'));
  const md = h('div', { class: 'md panel-note', 'data-note': name });
  md.append(renderMarkdown(text));
  panelState(noteTitle(name), md, h('p', { class: 'panel-foot' }, h('code', null, name)));
}

export async function showHandoffs(chat) {
  const c = S.chats.get(chat);
  const title = `Past handoffs · ${chatName(c)}`;
  const seq = panelLoading(title);
  const data = await getJSON(`/api/chats/${encodeURIComponent(chat)}/handoffs`);
  if (seq !== panel.seq || !dom.panel.open) return;
  const list = data?.handoffs;
  if (!Array.isArray(list)) return panelState(title, h('p', { class: 'panel-empty error' }, 'The past handoffs could not be read.'));
  const intro = h('p', { class: 'panel-intro' }, 'Each boundary wrote down where the work stood before it archived and cleared the conversation.');
  if (!list.length) return panelState(title, intro, h('p', { class: 'panel-empty' }, 'No boundary has happened in this chat yet.'));
  const ul = h('ul', { class: 'panel-list' });
  for (const e of [...list].reverse()) {
    const d = h('details', { class: 'handoff-item', 'data-boundary': e.boundary });
    d.append(h('summary', null,
      h('span', { class: 'item-title' }, `Handoff ${e.number}`),
      h('span', { class: 'item-meta' }, [e.reason === 'hard' ? 'hard limit' : e.reason === 'assistant' ? 'the assistant consolidated' : e.reason,
        e.time ? longTime(e.time) : '', `events ${e.from}–${e.through}`].filter(Boolean).join(' · '))));
    const md = h('div', { class: 'md record' });
    md.append(renderMarkdown(e.record || '(no record)'));
    d.append(md);
    ul.append(h('li', null, d));
  }
  ul.querySelector('details')?.setAttribute('open', '');
  panelState(title, intro, ul);
}

// showSettings draws Settings on tab (chat or chains) from fresh answers of
// the gateway: the quotas and the reading change while the panel is away.
export async function showSettings(tab) {
  const seq = panelLoading('Settings');
  const [chains, models, quotas] = await Promise.all([getJSON('/api/chains'), getJSON('/api/models'), getJSON('/api/quotas')]);
  if (seq !== panel.seq || !dom.panel.open) return;
  if (!chains && !models) return panelState('Settings', h('p', { class: 'panel-empty error' }, 'The settings could not be read.'));
  const v = currentView();
  const data = {
    chains: chains?.chains || [], roles: chains?.roles || {}, models: models?.models || [], quotas: quotas?.quotas || [],
    chat: v ? { id: v.id, ...(S.chats.get(v.id) || {}) } : null, reading: v?.context || null,
  };
  panelState('Settings', settingsView(h, tab, data));
  dom.panelBody.querySelector(`.settings-tab[data-tab="${tab}"]`)?.focus();
}

// chatModel is the model the open chat's last context reading names.
export function chatModel() {
  const m = currentView()?.context?.model;
  return typeof m === 'string' && m ? m : null;
}

export async function showModel(name) {
  const seq = panelLoading('Model details');
  const [data, quotas] = await Promise.all([getJSON('/api/models'), getJSON('/api/quotas')]);
  if (seq !== panel.seq || !dom.panel.open) return;
  panel.quotas = quotas?.quotas ?? null;
  const models = data?.models;
  if (!Array.isArray(models) || !models.length) return panelState('Model details', h('p', { class: 'panel-empty error' }, 'The models could not be read.'));
  panel.models = models;
  const want = name || chatModel();
  drawModel(models.find((m) => m.name === want) || models[0]);
}

// limitName spells a context limit as the select offers it.
export function limitName(l) {
  if (!l || l === 'auto') return 'Auto';
  if (l === 'full') return 'Full';
  return l;
}

export function tokens(n) {
  return `${num(n, 0).toLocaleString()} tokens`;
}

// drawModel shows one model's request budget, when it has choices the
// context limit select, and its conversation limits (soft and hard); note
// is {ok} or {error}, a line under the context limit, or under the
// conversation limits when its for is 'compaction'.
export function drawModel(m, note) {
  const limitNote = note?.for === 'compaction' ? null : note;
  const b = m.budget || {};
  const title = `Model details · ${m.name}`;
  const wrap = h('div', { class: 'model-details', 'data-model': m.name, 'data-limit': b.limit || m.context_limit || 'auto' });
  const others = (panel.models || []).filter((x) => x.name !== m.name);
  if (others.length) {
    const pick = h('select', { id: 'model-pick', class: 'model-select' });
    for (const x of panel.models) {
      const o = h('option', { value: x.name }, x.name === chatModel() ? `${x.name} (this chat)` : x.name);
      o.selected = x.name === m.name;
      pick.append(o);
    }
    wrap.append(h('div', { class: 'model-field' }, h('label', { for: 'model-pick' }, 'Model'), pick));
  }
  wrap.append(h('p', { class: 'panel-intro model-intro' },
    `${[m.provider, m.model].filter(Boolean).join(' · ') || m.name}${chatModel() === m.name ? ', the model of this chat' : ''}. `,
    'Every request must fit the request ceiling; the usage ring measures against whichever comes first, this ceiling or the conversation\'s hard limit.'));
  const win = num(b.window, num(m.window, 0));
  const limitIn = b.limit || m.context_limit || 'auto';
  const ceilingWhy = b.policy_window && b.policy_window < win
    ? `the context limit (${limitName(limitIn)})`
    : 'the window minus the response reserve';
  const rows = [
    ['window', 'Window', tokens(win), m.window > 0 ? '' : 'unknown to the catalog: assumed'],
    ['reserve', 'Response reserve', tokens(b.reserve), 'kept free for the reply'],
    ['ceiling', 'Request ceiling', tokens(b.ceiling), ceilingWhy],
    ['mark', 'Checkpoint mark (85 %)', tokens(b.mark), 'a measured request past it checkpoints the next turn'],
    ['warn', 'Warning (72 %)', tokens(b.warn), 'the agent is told once that a checkpoint is near'],
    ['limit', 'Limit in force', limitName(limitIn),
      m.configured && limitName(m.configured) !== limitName(limitIn) ? `runtime.yaml says ${limitName(m.configured)}; chosen here` : m.configured ? 'from runtime.yaml' : 'the default'],
  ];
  const dl = h('dl', { class: 'model-facts' });
  for (const [field, label, value, hint] of rows) {
    dl.append(h('div', { class: 'model-fact' },
      h('dt', null, label),
      h('dd', { 'data-field': field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
  }
  wrap.append(dl);
  const choices = Array.isArray(m.choices) ? m.choices : [];
  if (choices.length) {
    const sel = h('select', { id: 'context-limit', class: 'model-select', 'aria-describedby': 'context-limit-hint', 'data-model': m.name });
    for (const c of choices) {
      const o = h('option', { value: c.limit }, `${limitName(c.limit)} — ${tokens(c.ceiling)}`);
      o.selected = c.limit === limitIn;
      sel.append(o);
    }
    const status = h('p', { class: 'model-status', role: 'status' }, limitNote?.ok || '');
    const err = h('p', { class: 'model-error', role: 'alert' }, limitNote?.error || '');
    err.hidden = !limitNote?.error;
    wrap.append(h('div', { class: 'model-field limit-field' },
      h('label', { for: 'context-limit' }, 'Context limit'), sel,
      h('p', { id: 'context-limit-hint', class: 'fact-hint' },
        'Auto stops at 272k even on a larger window: long requests cost more on every turn and recall worse. Choose a larger step when a task needs it, or a smaller one to save cost. The next turn of every chat on this model uses it.'),
      status, err));
  } else {
    wrap.append(h('p', { class: 'model-none' },
      `The Auto limit of ${m.name} already is its whole window (a request ceiling of ${tokens(b.ceiling)}), so there is nothing to set.`));
  }
  wrap.append(compactionSection(m, note?.for === 'compaction' ? note : null));
  wrap.append(modelQuotaSection(h, m, panel.quotas));
  wrap.append(chatCostSection(h, S.current));
  const allowed = chatToolsSection();
  if (allowed) wrap.append(allowed);
  panelState(title, wrap);
}

// pct spells a share of the window as a percentage: 0.2 → "20", 0.225 →
// "22.5".
export function pct(r) {
  return String(Math.round(num(r, 0) * 1000) / 10);
}

// shareTokens is ratio of window in tokens, rounded down as the runtime
// rounds it.
export function shareTokens(window, ratio) {
  return window > 0 && ratio > 0 ? Math.floor(window * Math.min(ratio, 1)) : 0;
}

// compactionSection shows a model's conversation limits, soft and hard,
// as shares of its window and in tokens, with runtime.yaml's shares for
// reference, and the form that moves them; note is {ok} or {error}.
export function compactionSection(m, note) {
  const win = num(m.window, 0) || num(m.budget?.window, 0);
  const soft = num(m.soft_ratio, 0);
  const hard = num(m.hard_ratio, 0);
  const softTok = num(m.soft, 0);
  const hardTok = num(m.hard, 0);
  const hardCapped = hardTok < shareTokens(win, hard);
  const softCapped = softTok < shareTokens(win, soft);
  const cfg = m.configured_compaction || {};
  const chosen = num(cfg.soft_ratio, 0) !== soft || num(cfg.hard_ratio, 0) !== hard;
  const rows = [
    ['soft', `Soft (${pct(soft)} %)`, tokens(softTok), softCapped
      ? `lowered with hard, in proportion, so the warning still comes first: ${pct(soft)} % of the window would be ${tokens(shareTokens(win, soft))}`
      : 'the assistant is told to finish its step and bring its handoff up to date; nothing is cleared'],
    ['hard', `Hard (${pct(hard)} %)`, tokens(hardTok), hardCapped
      ? `capped by the checkpoint mark: ${pct(hard)} % of the window would be ${tokens(shareTokens(win, hard))}`
      : 'the conversation is written down and started fresh'],
    ['configured-compaction', 'runtime.yaml', `soft ${pct(cfg.soft_ratio)} % · hard ${pct(cfg.hard_ratio)} %`,
      chosen ? 'chosen here instead' : 'in force'],
  ];
  const dl = h('dl', { class: 'model-facts compaction-facts' });
  for (const [field, label, value, hint] of rows) {
    dl.append(h('div', { class: 'model-fact' },
      h('dt', null, label),
      h('dd', { 'data-field': field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
  }
  const input = (id, label, ratio) => {
    const inp = h('input', { type: 'number', id, name: id, class: 'compaction-input', min: 1, max: 100, step: 1, required: true,
      inputmode: 'decimal', value: pct(ratio), 'aria-describedby': `${id}-tokens` });
    return h('div', { class: 'compaction-input-row' },
      h('label', { for: id }, label),
      h('span', { class: 'compaction-number' }, inp, h('span', { class: 'compaction-unit', 'aria-hidden': 'true' }, '%')),
      h('output', { id: `${id}-tokens`, for: id, class: 'fact-hint compaction-preview' }, previewText(win, soft, hard, num(m.hard_cap, 0), id === 'soft-ratio' ? 'soft' : 'hard')));
  };
  const status = h('p', { class: 'compaction-status', role: 'status' }, note?.ok || '');
  const err = h('p', { class: 'compaction-error', role: 'alert' }, note?.error || '');
  err.hidden = !note?.error;
  const form = h('form', { class: 'compaction-form', 'data-model': m.name, 'data-window': win, 'data-cap': num(m.hard_cap, 0), novalidate: true },
    h('div', { class: 'compaction-inputs' },
      input('soft-ratio', 'Soft, % of the window', soft),
      input('hard-ratio', 'Hard, % of the window', hard)),
    h('div', { class: 'compaction-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary btn-sm compaction-save' }, 'Save'),
      h('span', { class: 'fact-hint' }, 'Soft must stay below hard. Checked before every request from the next one on.')),
    status, err);
  return h('section', { class: 'compaction', 'aria-labelledby': 'compaction-title', 'data-soft': soft, 'data-hard': hard },
    h('h3', { id: 'compaction-title', class: 'compaction-title' }, 'Conversation limits'),
    h('p', { class: 'panel-intro compaction-intro' },
      'Counted on the conversation itself, as shares of the window. Lower hard and the assistant consolidates more often and spends less per turn; soft decides how early before that it wraps up its step.'),
    dl, form);
}

// previewText is what the form's shares (soft, hard) give for which, in
// tokens, by the runtime's rule (limits.js, with the model's hard_cap): a
// share past the checkpoint mark shows what is used, not the bare share.
export function previewText(win, soft, hard, cap, which) {
  const ratio = which === 'soft' ? soft : hard;
  if (!(ratio > 0) || !(win > 0)) return '';
  const l = limitsFor(win, soft, hard, cap);
  const got = which === 'soft' ? l.soft : l.hard;
  if (got < shareTokens(win, ratio)) {
    return `${tokens(got)}: ${which === 'soft' ? 'lowered with hard' : 'capped by the checkpoint mark'} (${pct(ratio)} % of the window would be ${tokens(shareTokens(win, ratio))})`;
  }
  return `${tokens(got)} of the window`;
}

// applySaved puts model m's saved limits into the readings of the chats on
// it, so their rings move now rather than at their next turn.
function applySaved(m) {
  for (const v of S.views.values()) {
    if (v.context && (v.context.model || '') === m.name) v.context = applyLimits(v.context, m);
  }
  render();
}

// compactionRefusal is why the form's shares cannot be sent, or ''.
export function compactionRefusal(soft, hard) {
  if (!Number.isFinite(soft) || !Number.isFinite(hard)) return 'give soft and hard as percentages of the window.';
  if (!(soft > 0) || hard > 1) return 'both must be more than 0 % and at most 100 % of the window.';
  if (!(soft < hard)) return `soft must stay below hard, and soft ${pct(soft)} % is not below hard ${pct(hard)} %.`;
  return '';
}

// setCompaction PUTs the form's soft and hard shares and redraws the model
// from the server's answer, or says why they were refused: by this page
// (soft not below hard) before anything is sent, or by the server.
export async function setCompaction(form) {
  const name = form.dataset.model;
  const m = panel.models?.find((x) => x.name === name);
  const share = (id) => {
    const v = form.querySelector(`#${id}`)?.value.trim();
    return v ? Number(v) / 100 : NaN;
  };
  const soft = share('soft-ratio');
  const hard = share('hard-ratio');
  const status = form.querySelector('.compaction-status');
  const err = form.querySelector('.compaction-error');
  const refusal = compactionRefusal(soft, hard);
  if (refusal) {
    status.textContent = '';
    err.textContent = `The limits were not changed: ${refusal}`;
    err.hidden = false;
    return;
  }
  const seq = ++panel.seq;
  for (const el of form.querySelectorAll('input, button')) el.disabled = true;
  status.textContent = 'Saving…';
  err.hidden = true;
  const { r, body } = await putJSON(`/api/models/${encodeURIComponent(name)}/compaction`, { soft_ratio: soft, hard_ratio: hard });
  if (r?.status === 401) return goLogin();
  if (seq !== panel.seq || !dom.panel.open) return;
  if (r?.ok && body?.model) {
    const nm = body.model;
    panel.models = (panel.models || []).map((x) => (x.name === nm.name ? nm : x));
    applySaved(nm);
    drawModel(nm, { for: 'compaction', ok: `Saved: soft ${pct(nm.soft_ratio)} %, hard ${pct(nm.hard_ratio)} %. From the next request on: soft at ${tokens(nm.soft)}, hard at ${tokens(nm.hard)}.` });
  } else {
    const why = refusedWhy(r, body);
    if (m) drawModel(m, { for: 'compaction', error: `The limits were not changed: ${why}` });
    else {
      for (const el of form.querySelectorAll('input, button')) el.disabled = false;
      status.textContent = '';
      err.textContent = `The limits were not changed: ${why}`;
      err.hidden = false;
    }
  }
  dom.panelBody.querySelector('.compaction-save')?.focus();
}

// refusedWhy says why a putJSON did not save: the gateway's error, its
// status, or that it could not be reached.
function refusedWhy(r, body) {
  return body?.error || (r ? `the gateway answered ${r.status}` : 'the gateway could not be reached');
}

// setContextLimit PUTs the model's context limit and shows the budget the
// server answers with, or why it refused.
export async function setContextLimit(name, limit) {
  const m = panel.models?.find((x) => x.name === name);
  if (!m) return;
  const seq = ++panel.seq;
  const sel = dom.panelBody.querySelector('#context-limit');
  if (sel) sel.disabled = true;
  const status = dom.panelBody.querySelector('.model-status');
  if (status) status.textContent = 'Saving…';
  const { r, body } = await putJSON(`/api/models/${encodeURIComponent(name)}/context_limit`, { context_limit: limit });
  if (r?.status === 401) return goLogin();
  if (seq !== panel.seq || !dom.panel.open) return;
  if (r?.ok && body?.model) {
    const nm = body.model;
    panel.models = panel.models.map((x) => (x.name === nm.name ? nm : x));
    applySaved(nm);
    drawModel(nm, { ok: `Saved: ${limitName(nm.budget?.limit || limit)}. The next turn uses a request ceiling of ${tokens(nm.budget?.ceiling)}.` });
  } else {
    const why = refusedWhy(r, body);
    drawModel(m, { error: `The context limit was not changed: ${why}` });
  }
  dom.panelBody.querySelector('#context-limit')?.focus();
}

export function closePanel() {
  if (dom.panel.open) dom.panel.close();
}

export function longTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleString([], { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export function fmtBytes(n) {
  n = num(n, 0);
  return n >= 1024 ? `${(n / 1024).toFixed(n >= 10240 ? 0 : 1)} KB` : `${n} B`;
}
