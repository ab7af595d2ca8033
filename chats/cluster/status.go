package cluster

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NodeInfo is one node as its heartbeat describes it.
type NodeInfo struct {
	Name string `json:"name"`
	// HTTP is the node's gateway address.
	HTTP string `json:"http,omitempty"`
	// NATS is its embedded server's client URL ("" with an external NATS).
	NATS    string    `json:"nats,omitempty"`
	Started time.Time `json:"started"`
	// Leader and Chats are filled in by Status: whether the node holds the
	// leader lease, and how many chats' leases it holds.
	Leader bool `json:"leader"`
	Chats  int  `json:"chats"`
	// WorkspaceRefused is why this node refuses file and shell tools (its
	// workspace is not the others'), "" when they run (SetWorkspaceRefused).
	WorkspaceRefused string `json:"workspace_refused,omitempty"`
	// Breakers is the node's circuit breakers' snapshot, as its Monitor
	// gives it (SetBreakers); absent when none is published.
	Breakers json.RawMessage `json:"breakers,omitempty"`
}

// Status is what `mirror cluster status` shows.
type Status struct {
	// Node is the name of the node that answered.
	Node string `json:"node"`
	// Ready says whether the records stream and buckets exist.
	Ready bool `json:"ready"`
	// Leader is the node holding the leader lease ("" while none does).
	Leader string `json:"leader"`
	// Nodes are the nodes whose heartbeats are current, by name.
	Nodes []NodeInfo `json:"nodes"`
	// Replicas is how many servers keep each record.
	Replicas int `json:"replicas"`
}

// heartbeat writes this node's description with the lease TTL: a node
// that stops renewing it drops out of the status.
func (n *Node) heartbeat(ctx context.Context) {
	if _, _, _, err := n.buckets(); err != nil {
		return
	}
	ni := NodeInfo{Name: n.o.Name, HTTP: n.o.HTTP, NATS: n.ClientURL(), Started: n.started}
	n.describe(&ni)
	b, _ := json.Marshal(ni)
	// Only this node writes its key: a plain publish with the TTL (a Put
	// cannot carry one) replaces the last beat.
	_, err := n.js.PublishMsg(ctx, natsMsg("$KV."+NodesBucket+"."+n.o.Name, b), jetstream.WithMsgTTL(n.o.LeaseTTL))
	if err != nil && ctx.Err() == nil {
		n.log.Debug("cluster: heartbeat", "err", err)
	}
}

// Status reads the nodes, the leader and the chats' owners from the
// buckets (any node answers the same).
func (n *Node) Status(ctx context.Context) (Status, error) {
	st := Status{Node: n.o.Name, Replicas: n.o.Replicas, Nodes: []NodeInfo{}}
	_, leases, nodes, err := n.buckets()
	if err != nil {
		return st, nil // not ready: the answer says so
	}
	st.Ready = true
	byName := map[string]*NodeInfo{}
	if err := watchAll(ctx, nodes, nil, func(e jetstream.KeyValueEntry) {
		var ni NodeInfo
		if json.Unmarshal(e.Value(), &ni) == nil && ni.Name != "" {
			byName[ni.Name] = &ni
		}
	}); err != nil {
		return st, err
	}
	node := func(name string) *NodeInfo {
		if byName[name] == nil {
			byName[name] = &NodeInfo{Name: name}
		}
		return byName[name]
	}
	if err := watchAll(ctx, leases, nil, func(e jetstream.KeyValueEntry) {
		holder := string(e.Value())
		switch {
		case e.Key() == leaderKey:
			st.Leader = holder
			node(holder).Leader = true
		case strings.HasPrefix(e.Key(), chatKeyPrefix):
			node(holder).Chats++
		}
	}); err != nil {
		return st, err
	}
	for _, ni := range byName {
		st.Nodes = append(st.Nodes, *ni)
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Name < st.Nodes[j].Name })
	return st, nil
}

// watchAll calls fn with each current (not deleted) entry of kv, then
// returns: the watcher's nil entry marks the end of the current values.
func watchAll(ctx context.Context, kv jetstream.KeyValue, keys []string, fn func(jetstream.KeyValueEntry)) error {
	var w jetstream.KeyWatcher
	var err error
	if keys == nil {
		w, err = kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	} else {
		w, err = kv.WatchFiltered(ctx, keys, jetstream.IgnoreDeletes())
	}
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil
			}
			fn(e)
		}
	}
}

// heartbeatExtra is what a node adds to its heartbeat beyond its names.
type heartbeatExtra struct {
	mu        sync.Mutex
	workspace string
	breakers  func() any
}

// SetWorkspaceRefused publishes, with the next heartbeats, why this node
// refuses file and shell tools ("" when they run).
func (n *Node) SetWorkspaceRefused(reason string) {
	n.extra.mu.Lock()
	n.extra.workspace = reason
	n.extra.mu.Unlock()
}

// SetBreakers makes every heartbeat carry snap(): the node's circuit
// breakers, for the Monitor of any node.
func (n *Node) SetBreakers(snap func() any) {
	n.extra.mu.Lock()
	n.extra.breakers = snap
	n.extra.mu.Unlock()
}

func (n *Node) describe(ni *NodeInfo) {
	n.extra.mu.Lock()
	ni.WorkspaceRefused = n.extra.workspace
	snap := n.extra.breakers
	n.extra.mu.Unlock()
	if snap != nil {
		if b, err := json.Marshal(snap()); err == nil {
			ni.Breakers = b
		}
	}
}
