// Quota waits and learned quotas, in words (seed 001, "Gemini's tokens per
// minute"): the chat's wait status with its countdown, and the facts the
// Settings → Chains view shows for each model. Pure functions of the
// server's numbers, plus one ticker that keeps every countdown current.
//
// DOM contract (browser tests rely on it):
//   .notice.quota-wait[data-wait-until=MS]  in the live reply while its
//       model request waits; data-quota and data-usage hold the numbers;
//       its text counts down once a second; gone when the turn proceeds

// compactTokens spells a token count the short way: 950, 38k, 1.2M.
export function compactTokens(n) {
  n = Number(n) || 0;
  if (n < 1000) return String(Math.round(n));
  if (n < 1e6) return `${Math.round(n / 100) / 10}k`.replace('.0k', 'k');
  return `${Math.round(n / 1e5) / 10}M`.replace('.0M', 'M');
}

// waitFrom turns a quota.wait event into the wait the chat shows; its end
// is fixed on arrival, so re-renders do not restart the countdown.
export function waitFrom(ev, now = Date.now()) {
  const ms = Math.max(0, Number(ev.wait_ms) || 0);
  return { quota: Math.max(0, Number(ev.quota) || 0), usage: Math.max(0, Number(ev.usage) || 0), ms, until: now + ms };
}

// waitText says what a wait is for and how long is left, e.g. "Waiting
// 12 s for the provider's tokens-per-minute quota (used 38k of 40k)".
export function waitText(w, now = Date.now()) {
  const left = Math.ceil((w.until - now) / 1000);
  const why = w.quota > 0
    ? `the provider's tokens-per-minute quota (used ${compactTokens(w.usage)} of ${compactTokens(w.quota)})`
    : 'the provider, which asked to retry later';
  if (left <= 0) return `Continuing — the wait for ${why} is over.`;
  return `Waiting ${left} s for ${why}, then the same request continues.`;
}

// waitNotice is the status element of a wait; h is the page's element
// builder.
export function waitNotice(h, w, now = Date.now()) {
  return h('p', { class: 'notice wait quota-wait', role: 'status', 'data-wait-until': w.until, 'data-quota': w.quota, 'data-usage': w.usage },
    waitText(w, now));
}

// tickWaits brings every countdown under root up to now. Only the text
// changes, so nothing else of the conversation re-renders.
export function tickWaits(root, now = Date.now()) {
  for (const el of root.querySelectorAll('.quota-wait[data-wait-until]')) {
    const w = { until: Number(el.dataset.waitUntil), quota: Number(el.dataset.quota), usage: Number(el.dataset.usage) };
    const t = waitText(w, now);
    if (el.textContent !== t) el.textContent = t;
  }
}

let ticker = null;

// startTicker keeps the countdowns under root current, once a second; a
// second call does nothing.
export function startTicker(root) {
  if (ticker) return;
  ticker = setInterval(() => tickWaits(root), 1000);
}

// quotasOf returns the /api/quotas rows of one model (a model may be used
// with several keys, each its own row).
export function quotasOf(rows, model) {
  return (Array.isArray(rows) ? rows : []).filter((q) => q && q.provider === model.provider && q.model === model.model);
}

function clock(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleString();
}

// quotaFacts is what one /api/quotas row says, as [field, label, value]
// rows: the last quota reported, the local usage of the window, and any
// wait.
export function quotaFacts(q, now = Date.now()) {
  const out = [];
  const o = q.quota;
  if (o && o.limit > 0) {
    const from = o.source === '429' ? 'a rate-limit refusal' : 'rate-limit headers';
    const state = o.active ? `enforced until ${clock(o.expires_at)}` : 'expired: not enforced until the provider reports again';
    out.push(['quota', 'Last reported quota', `${Number(o.limit).toLocaleString()} input tokens per minute`,
      `from ${from} at ${clock(o.observed_at)}; ${state}`]);
  } else {
    out.push(['quota', 'Last reported quota', 'none yet', 'requests go at once until the provider reports one']);
  }
  const parts = [`${Number(q.usage || 0).toLocaleString()} tokens in the last minute`];
  if (q.budget > 0) parts.push(`of ${Number(q.budget).toLocaleString()} usable (10 % headroom kept)`);
  const more = [];
  if (q.reserved > 0) more.push(`${Number(q.reserved).toLocaleString()} held by running requests`);
  if (q.outside > 0) more.push(`${Number(q.outside).toLocaleString()} counted by the provider elsewhere`);
  out.push(['usage', 'Local usage', parts.join(' '), more.join('; ')]);
  const waits = [];
  if (q.waiting > 0) waits.push(`${q.waiting} request${q.waiting === 1 ? '' : 's'} waiting now`);
  if (q.blocked_until && Date.parse(q.blocked_until) > now) waits.push(`the provider asked to wait until ${clock(q.blocked_until)}`);
  const lw = q.last_wait;
  const why = lw && lw.quota > 0 ? `used ${compactTokens(lw.usage)} of ${compactTokens(lw.quota)}` : 'a retry delay';
  const last = lw ? `last wait ${Math.max(1, Math.round((lw.wait_ms || 0) / 1000))} s at ${clock(lw.at)} (${why})` : '';
  out.push(['wait', 'Wait', waits.length ? waits.join('; ') : 'none now', last]);
  return out;
}

// modelQuotaSection is the Quota section of a model's details: each key's
// last reported quota, local usage and wait, as Settings → Chains shows
// them. rows are /api/quotas rows (null when they could not be read).
export function modelQuotaSection(h, model, rows) {
  const sec = h('section', { class: 'model-quota', 'aria-labelledby': 'model-quota-title' },
    h('h3', { id: 'model-quota-title', class: 'compaction-title' }, 'Quota'));
  if (!Array.isArray(rows)) {
    sec.append(h('p', { class: 'fact-hint' }, 'The quotas could not be read.'));
    return sec;
  }
  const mine = quotasOf(rows, model);
  if (!mine.length) {
    sec.append(h('p', { class: 'fact-hint quota-none' }, 'No quota reported yet: requests go at once until the provider reports one.'));
    return sec;
  }
  for (const q of mine) {
    const dl = h('dl', { class: 'model-facts quota-facts', 'data-key': q.fingerprint || '' });
    for (const [field, label, value, hint] of quotaFacts(q)) {
      dl.append(h('div', { class: 'model-fact' }, h('dt', null, label),
        h('dd', { 'data-field': 'quota-' + field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
    }
    sec.append(dl);
  }
  return sec;
}
