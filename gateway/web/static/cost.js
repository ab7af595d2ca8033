// What the open chat has cost, from the cost ledger (GET
// /api/chats/{id}/cost, see docs/protocol.md): a section of the details
// panel that fills itself once the answer arrives.
//
// DOM contract (browser tests rely on it):
//   section.chat-cost[data-chat=ID]   the section; data-cost = today's cost
//                                     and data-total = the chat's total once read
//   .chat-cost-today, .chat-cost-total  the lines in words

// money spells an amount in the currency of models[].prices.
export function money(n) {
  n = Number(n) || 0;
  return n > 0 && n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

// spendText says what a SPEND cost and what was billed, e.g. "$0.14 · 3
// requests, 12k input (10k cached), 300 output tokens".
export function spendText(s) {
  const n = (x) => (Number(x) || 0).toLocaleString();
  const cached = Number(s?.cached_tokens) > 0 ? ` (${n(s.cached_tokens)} cached)` : '';
  const reqs = Number(s?.requests) === 1 ? '1 request' : `${n(s?.requests)} requests`;
  return `${money(s?.cost)} · ${reqs}, ${n(s?.input_tokens)} input${cached}, ${n(s?.output_tokens)} output tokens`;
}

/** chatCostSection returns the section for chat, filled when the ledger answers. */
export function chatCostSection(h, chat) {
  const sec = h('section', { class: 'chat-cost', 'data-chat': chat || '' }, h('h3', null, 'Cost of this chat'));
  if (!chat) return sec;
  const today = h('p', { class: 'chat-cost-today' }, 'Reading…');
  const total = h('p', { class: 'chat-cost-total' });
  sec.append(today, total);
  fetch(`/api/chats/${encodeURIComponent(chat)}/cost`, { credentials: 'same-origin', cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(String(r.status)))))
    .then((c) => {
      const budget = Number(c.budget) > 0 ? ` of a daily budget of ${money(c.budget)} (resets 00:00 UTC)` : '';
      today.textContent = `Today: ${spendText(c.today)}${budget}`;
      total.textContent = `In all: ${spendText(c.total)}`;
      sec.dataset.cost = String(Number(c.today?.cost) || 0);
      sec.dataset.total = String(Number(c.total?.cost) || 0);
    })
    .catch(() => {
      today.textContent = 'The cost could not be read.';
    });
  return sec;
}
