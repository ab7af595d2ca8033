// The limits a chat's usage ring and the Model details show, as pure
// functions of the server's numbers (no DOM, so they run under node).
//
// The ring's scale is the limit that matters: of the two a conversation
// can reach, the conversation's hard limit (where a boundary writes it down
// and starts fresh) and the request ceiling (whose checkpoint mark re-plans
// the view), the one the reading is nearer to. Hard is counted on the
// conversation and the ceiling on the whole request, so each is shown with
// its own quantity. When limits are saved, applyLimits puts the model's new
// figures into the readings, so the ring moves at once instead of at the
// next turn.

// ringScale reads a context reading (the context event's fields) as the
// ring draws it, or null when there is nothing to measure against:
//   basis  'hard' (the conversation against hard, soft as its tick) or
//          'ceiling' (the request against the ceiling, the next checkpoint
//          as its tick; the window when the reading has no ceiling)
//   val, den, frac, ticks [[at, cls]]
export function ringScale(ctx) {
  if (!ctx) return null;
  const n = (x) => (Number.isFinite(Number(x)) ? Number(x) : 0);
  const used = n(ctx.used);
  const soft = n(ctx.soft);
  const hard = n(ctx.hard);
  const request = n(ctx.request);
  const ceiling = n(ctx.ceiling) > 0 ? n(ctx.ceiling) : n(ctx.window);
  const next = n(ctx.next_checkpoint);
  const byHard = hard > 0 ? { basis: 'hard', val: used, den: hard, ticks: [[soft, 'tick-soft']] } : null;
  const byCeiling = ceiling > 0
    ? { basis: 'ceiling', val: request > 0 ? request : used, den: ceiling, ticks: next > 0 ? [[next, 'tick-next']] : [] }
    : null;
  let s = byHard || byCeiling;
  if (byHard && byCeiling && byCeiling.val / byCeiling.den > byHard.val / byHard.den) s = byCeiling;
  if (!s) return null;
  s.frac = Math.max(0, Math.min(1, s.val / s.den));
  s.ticks = s.ticks.filter(([at]) => at > 0 && at <= s.den);
  return s;
}

// ringLines are the ring's words (its title and aria-valuetext): what it
// measures, against what, and the other limit.
export function ringLines(ctx, s) {
  const n = (x) => (Number(x) || 0).toLocaleString('en-US');
  const pct = Math.round(s.frac * 100);
  const lines = [];
  if (s.basis === 'hard') {
    lines.push(`Conversation: ${n(s.val)} of ${n(s.den)} tokens, ${pct}% of the hard limit, where it is written down and started fresh.`);
    lines.push(`Soft ${n(ctx.soft)}: ${ctx.soft_reached ? 'reached' : 'not reached'} · Hard: ${ctx.hard_reached ? 'reached' : 'not reached'}.`);
    if (Number(ctx.request) > 0 && Number(ctx.ceiling) > 0) lines.push(`Request: ${n(ctx.request)} of the ${n(ctx.ceiling)}-token ceiling.`);
  } else {
    const of = Number(ctx.ceiling) > 0 ? 'the request ceiling' : 'the window';
    lines.push(`${Number(ctx.request) > 0 ? 'Request' : 'Conversation'}: ${n(s.val)} of ${n(s.den)} tokens, ${pct}% of ${of}.`);
    if (Number(ctx.next_checkpoint) > 0) lines.push(`Next checkpoint at ${n(ctx.next_checkpoint)}.`);
    if (Number(ctx.hard) > 0) lines.push(`Conversation: ${n(ctx.used)} of hard ${n(ctx.hard)} (soft ${n(ctx.soft)}).`);
  }
  return lines;
}

// applyLimits is reading ctx with model m's limits in force (m as GET
// /api/models or a saved setting answers it): soft, hard, the ceiling and
// the next checkpoint, and whether soft and hard are reached. A reading of
// another model is returned as it is.
export function applyLimits(ctx, m) {
  if (!ctx || !m || (ctx.model && ctx.model !== m.name)) return ctx;
  const used = Number(ctx.used) || 0;
  const out = { ...ctx, soft: Number(m.soft) || 0, hard: Number(m.hard) || 0 };
  const b = m.budget || {};
  if (Number(b.ceiling) > 0) out.ceiling = Number(b.ceiling);
  if (Number(b.mark) > 0) out.next_checkpoint = Number(b.mark);
  if (Number(m.window) > 0) out.window = Number(m.window);
  out.hard_reached = out.hard > 0 && used >= out.hard;
  out.soft_reached = out.hard_reached || (out.soft > 0 && used >= out.soft);
  return out;
}

// limitsFor is the soft and hard, in tokens, that shares of window give
// with hard capped at cap (the model's hard_cap): the rule of the
// runtime's boundary.NewLimits, so a preview of shares not yet saved shows
// what would be used.
export function limitsFor(window, softRatio, hardRatio, cap) {
  const share = (r) => (window > 0 && r > 0 ? Math.floor(window * Math.min(r, 1)) : 0);
  let soft = share(softRatio);
  let hard = share(hardRatio);
  if (cap > 0 && hard > cap) {
    hard = cap;
    const s = Math.min(softRatio, 1);
    const h = Math.min(hardRatio, 1);
    if (s > 0 && s < h) soft = Math.min(soft, Math.floor((hard * s) / h));
  }
  if (hard > 0 && soft >= hard) soft = hard - 1;
  return { soft, hard };
}
