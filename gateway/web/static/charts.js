// Monitor charts: pictures of the aggregates the monitor keeps in the
// database (GET /api/monitor/aggregates?span=day|week, see docs/protocol.md),
// drawn with uPlot (vendored under vendor/uplot/). They survive a restart:
// the data is stored, not Prometheus counters in memory.
//
// DOM contract (browser tests rely on it):
//
//   #charts                         the section; data-span = day | week once drawn,
//                                   data-loaded = the number of loads
//   button.span[data-span=S]        picks the span (aria-pressed on the shown one)
//   figure.chart[data-chart=C]      one chart, C = breakers | requests | errors |
//                                   latency | quota | tokens | cost; data-series = the
//                                   number of series drawn (0 with .chart-empty shown)
//   .chart-plot                     where uPlot draws (canvas inside)
//
// Series: breakers, one stepped line per breaker that was not closed the
// whole span (0 closed, 1 half open, 2 open); requests, errors and latency
// (mean ms per step), one line per breaker that saw requests; quota, used and
// limit per quota; tokens, input+output per day per model; cost, what the
// providers billed per day per model, priced by models[].prices.

import uPlot from './vendor/uplot/uPlot.esm.js';

const CHARTS = [
  ['breakers', 'Breaker states'],
  ['requests', 'Requests'],
  ['errors', 'Errors'],
  ['latency', 'Latency (mean, ms)'],
  ['quota', 'Quota use against the quota (tokens per minute)'],
  ['tokens', 'Tokens per day'],
  ['cost', 'Cost per day'],
];

// Colour-blind-safe palette (Okabe–Ito), readable on light and dark.
const PALETTE = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#d55e00', '#56b4e9', '#b8a800', '#7f7f7f'];
const STATE_LEVEL = { closed: 0, half_open: 1, open: 2 };
const STATE_NAME = ['closed', 'half open', 'open'];

const plots = new Map(); // chart name → uPlot
let span = 'day';
let loads = 0;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

function cssVar(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

function color(i) {
  return PALETTE[i % PALETTE.length];
}

function axes(yValues, ySize) {
  const stroke = cssVar('--muted', '#6a7079');
  const grid = { stroke: cssVar('--border', '#e2e2de'), width: 1 };
  const y = { stroke, grid, ticks: grid, size: ySize || 56 };
  if (yValues) y.values = yValues;
  return [{ stroke, grid, ticks: grid }, y];
}

function width(box) {
  return Math.max(260, Math.floor(box.clientWidth || box.parentElement?.clientWidth || 320));
}

function draw(name, xs, series, opts = {}) {
  const fig = document.querySelector(`#charts figure.chart[data-chart="${name}"]`);
  const box = fig.querySelector('.chart-plot');
  plots.get(name)?.destroy();
  plots.delete(name);
  box.replaceChildren();
  fig.dataset.series = String(series.length);
  fig.querySelector('.chart-empty').hidden = series.length > 0;
  if (!series.length) return;
  const p = new uPlot({
    width: width(box),
    height: opts.height || 190,
    scales: { x: { time: opts.time !== false, ...(opts.x || {}) }, y: opts.y || {} },
    axes: axes(opts.yValues, opts.ySize),
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    series: [{ label: opts.xLabel || 'Time' }, ...series],
  }, [xs, ...series.map((s) => s.data)], box);
  plots.set(name, p);
}

function line(label, data, i, extra = {}) {
  return { label, data, stroke: color(i), width: 2, spanGaps: false, points: { show: false }, ...extra };
}

// timeline turns each breaker's spans into values on the union of their
// edges, so a short open span shows however long the step is.
function timeline(breakers, from, to) {
  const edges = new Set([from, to]);
  for (const b of breakers) for (const s of b.spans) edges.add(Date.parse(s.from) / 1000).add(Date.parse(s.to) / 1000);
  const xs = [...edges].filter((x) => x >= from && x <= to).sort((a, b) => a - b);
  const stepped = uPlot.paths.stepped({ align: 1 });
  const series = breakers.map((b, i) => {
    const data = xs.map((x) => {
      const s = b.spans.find((sp) => Date.parse(sp.from) / 1000 <= x && x < Date.parse(sp.to) / 1000) || b.spans[b.spans.length - 1];
      return STATE_LEVEL[s.state] ?? 0;
    });
    return line(b.scope || b.id, data, i, { paths: stepped, value: (u, v) => (v == null ? '—' : STATE_NAME[v]) });
  });
  return { xs, series };
}

function render(a) {
  const from = Date.parse(a.from) / 1000;
  const to = Date.parse(a.to) / 1000;
  const t = timeline(a.breakers || [], from, to);
  draw('breakers', t.xs, t.series, { y: { range: [-0.2, 2.2] }, yValues: (u, vals) => vals.map((v) => STATE_NAME[v] ?? ''), ySize: 72, height: 150 + 12 * t.series.length });

  const provs = a.providers || [];
  const name = (p) => p.scope || p.id;
  draw('requests', a.times, provs.map((p, i) => line(name(p), p.requests, i)));
  draw('errors', a.times, provs.filter((p) => p.errors.some((n) => n > 0)).map((p, i) => line(name(p), p.errors, i)));
  // Points too: a step with requests between idle ones has no line to draw.
  draw('latency', a.times, provs.map((p, i) => line(name(p), p.latency_ms, i, { points: { show: true, size: 5 } })));

  const quotas = [];
  (a.quotas || []).forEach((q, i) => {
    quotas.push(line(`${q.key} used`, q.used, i));
    quotas.push(line(`${q.key} quota`, q.limit, i, { dash: [6, 4], width: 1.5 }));
  });
  draw('quota', a.times, quotas);

  // One bar per day, drawn at midday; the axis spans whole days, so a
  // single day does not stretch over years.
  const bars = uPlot.paths.bars({ size: [0.6, 48] });
  const days = a.days || [];
  const dayRange = days.length ? [days[0], days[days.length - 1] + 86400] : null;
  draw('tokens', days.map((d) => d + 43200), (a.tokens || []).map((m, i) => line(m.model, m.in.map((n, k) => n + m.out[k]), i,
    { paths: bars, fill: color(i) + '99', points: { show: false } })), dayRange ? { x: { range: () => dayRange } } : {});
  // Models without prices cost 0 every day: left out, like a breaker without errors.
  draw('cost', days.map((d) => d + 43200), (a.costs || []).filter((m) => m.cost.some((c) => c > 0)).map((m, i) => line(m.model, m.cost, i,
    { paths: bars, fill: color(i) + '99', points: { show: false }, value: (u, v) => (v == null ? '—' : v.toFixed(2)) })), dayRange ? { x: { range: () => dayRange } } : {});
}

async function load() {
  const section = document.querySelector('#charts');
  try {
    const r = await fetch(`/api/monitor/aggregates?span=${encodeURIComponent(span)}`, { credentials: 'same-origin', cache: 'no-store' });
    if (!r.ok) {
      section.hidden = r.status === 503; // no monitor in this gateway
      return;
    }
    const a = await r.json();
    section.hidden = false;
    render(a);
    section.dataset.span = span;
    section.dataset.loaded = String(++loads);
  } catch {
    // The feed's status line says when the server is away; try next time.
  }
}

/** initCharts builds the chart section's figures and keeps them fresh. */
export function initCharts() {
  const section = document.querySelector('#charts');
  if (!section) return;
  const grid = section.querySelector('.charts');
  for (const [name, title] of CHARTS) {
    grid.append(el('figure', { class: 'chart', 'data-chart': name, 'data-series': '0' },
      el('figcaption', { text: title }),
      el('div', { class: 'chart-plot' }),
      el('p', { class: 'chart-empty mon-empty', text: 'Nothing recorded in this period.' })));
  }
  for (const b of section.querySelectorAll('button.span')) {
    b.addEventListener('click', () => {
      span = b.dataset.span;
      for (const o of section.querySelectorAll('button.span')) o.setAttribute('aria-pressed', String(o === b));
      load();
    });
  }
  let resize = 0;
  window.addEventListener('resize', () => {
    cancelAnimationFrame(resize);
    resize = requestAnimationFrame(() => {
      for (const p of plots.values()) p.setSize({ width: width(p.root.parentElement), height: p.height });
    });
  });
  // Axis and grid colours come from the theme: draw again when it changes.
  document.addEventListener('mirror:theme', load);
  load();
  setInterval(load, 60_000);
}
