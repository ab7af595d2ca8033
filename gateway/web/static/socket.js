// Mirror browser client: the WebSocket at /ws (connect, reconnect with
// backoff, hello, requests and their answers) and the HTTP reads (getJSON).

import { handleFrame } from './frames.js';
import { render, setStatus } from './render.js';
import { S } from './state.js';

export function connect() {
  clearTimeout(S.timer);
  S.timer = null;
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  let ws;
  try {
    ws = new WebSocket(`${proto}//${location.host}/ws`);
  } catch {
    scheduleReconnect();
    return;
  }
  S.ws = ws;
  S.connected = false;
  S.opened = false;
  setStatus(S.attempt === 0 && !S.session ? 'connecting' : 'reconnecting');
  ws.onopen = () => {
    if (S.ws !== ws) return;
    S.opened = true;
    ws.send(JSON.stringify({ type: 'hello', client: 'mirror-web' }));
  };
  ws.onmessage = (e) => {
    if (S.ws !== ws) return;
    let f;
    try {
      f = JSON.parse(e.data);
    } catch {
      return;
    }
    if (f && typeof f === 'object') handleFrame(f);
  };
  ws.onclose = (e) => {
    if (S.ws !== ws) return;
    onDisconnect(e.code);
  };
  ws.onerror = () => {}; // a close event follows
}

export function onDisconnect(code) {
  const neverOpened = !S.opened;
  S.ws = null;
  S.connected = false;
  S.opened = false;
  if (code === 4401) {
    goLogin();
    return;
  }
  // Answers to requests in flight are lost; the state they guard is reset so
  // the person can try again, and the outbox resends on its own.
  S.reqs.clear();
  for (const v of S.views.values()) {
    v.subscribed = false;
    v.opening = false;
    v.stopping = false;
    v.busy.clear();
    for (const ed of v.editing.values()) ed.saving = false;
  }
  setStatus('reconnecting');
  scheduleReconnect(neverOpened);
  render();
}

export function scheduleReconnect(neverOpened = true) {
  clearTimeout(S.timer);
  const base = Math.min(5000, 500 * 2 ** S.attempt);
  S.attempt++;
  const delay = Math.round(base * (0.75 + Math.random() * 0.5));
  S.timer = setTimeout(connect, Math.min(delay, 5000));
  // A refused upgrade (401 when the cookie is gone) never reaches onopen and
  // shows no close code; after a few of those, ask plain HTTP whether we are
  // still signed in.
  if (neverOpened && S.attempt >= 3 && S.attempt % 3 === 0) probeAuth();
}

export async function probeAuth() {
  try {
    const r = await fetch('/api/chats', { credentials: 'same-origin', cache: 'no-store', redirect: 'manual' });
    if (r.status === 401) goLogin();
  } catch {
    // the server is down: keep retrying
  }
}

export function goLogin() {
  clearTimeout(S.timer);
  location.assign('/login');
}

export function reconnectNow() {
  if (!S.ws && S.timer) {
    S.attempt = 0;
    connect();
  }
}

export function sendFrame(frame) {
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN || !S.connected) return false;
  S.ws.send(JSON.stringify(frame));
  return true;
}

// request sends frame with a fresh req and remembers meta for its answer.
export function request(frame, meta) {
  const req = 'w' + ++S.reqN;
  frame.req = req;
  if (!sendFrame(frame)) return null;
  if (meta) S.reqs.set(req, meta);
  return req;
}

export function takeReq(f) {
  if (!f.req) return null;
  const m = S.reqs.get(f.req) || null;
  S.reqs.delete(f.req);
  return m;
}

// putJSON PUTs payload as JSON; r is the response (null when the gateway
// could not be reached) and body its JSON (null when it sent none).
export async function putJSON(url, payload) {
  try {
    const r = await fetch(url, {
      method: 'PUT', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(payload),
    });
    return { r, body: await r.json().catch(() => null) };
  } catch {
    return { r: null, body: null };
  }
}

export async function getJSON(url) {
  try {
    const r = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
    if (r.status === 401) {
      goLogin();
      return null;
    }
    return r.ok ? await r.json() : null;
  } catch {
    return null;
  }
}
