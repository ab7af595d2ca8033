// Mirror monitor: the cluster section (cluster mode only).
//
// Data: GET /api/cluster (owners; 404 on a single gateway, which keeps
// the section hidden), every 5 s: the nodes with their heartbeats, the
// leader, the chats each node owns, whether a node refuses file and shell
// tools (its workspace is not shared), and each node's unresolved breakers.
//
// DOM contract (stable; browser tests rely on it):
//
//   #cluster-section                hidden unless GET /api/cluster answers 200
//   #cluster-leader                 the leader's name ("none yet" while electing)
//   .cluster-node[data-name=NAME]   one node; class .leader on the leader;
//                                   children .name, .role (leader | node),
//                                   .chats (count), .http, .workspace (only when
//                                   the node refuses the tools: the reason), and
//                                   .node-breakers > .node-breaker[data-id=ID]
//                                   (data-state = open | half_open)

import { $, el } from './dom.js';

function nodeEl(n) {
  const breakers = Array.isArray(n.breakers) ? n.breakers : [];
  return el('li', { class: `cluster-node${n.leader ? ' leader' : ''}`, 'data-name': n.name },
    el('span', { class: 'name' }, n.name),
    el('span', { class: 'role' }, n.leader ? 'leader' : 'node'),
    el('span', { class: 'chats', title: 'chats owned' }, String(n.chats || 0)),
    n.http ? el('span', { class: 'http' }, n.http) : null,
    n.workspace_refused ? el('span', { class: 'workspace', role: 'note' }, n.workspace_refused) : null,
    el('ul', { class: 'node-breakers' }, ...(breakers.length
      ? breakers.map((b) => el('li', { class: `node-breaker ${b.state}`, 'data-id': b.id, 'data-state': b.state },
        `${b.scope || b.id}: ${b.state}${b.reason ? ' (' + b.reason + ')' : ''}`))
      : [el('li', { class: 'node-breakers-none' }, 'breakers closed')])));
}

// loadCluster shows the section while GET /api/cluster answers 200.
export async function loadCluster() {
  let st = null;
  try {
    const res = await fetch('/api/cluster', { headers: { Accept: 'application/json' } });
    if (res.status === 200) st = await res.json();
    else if (res.status === 404) return; // a single gateway: nothing to show, ever
  } catch { /* try again */ }
  const ok = !!st;
  $('cluster-section').hidden = !ok;
  if (ok) {
    const nodes = st.nodes || [];
    $('cluster-count').textContent = String(nodes.length);
    $('cluster-leader').textContent = st.leader || 'none yet';
    $('cluster-nodes').replaceChildren(...nodes.map(nodeEl));
  }
  setTimeout(loadCluster, 5000);
}
