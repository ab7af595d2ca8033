package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats/cluster"
)

// failoverProbe watches, from a survivor's NATS server, where the time
// goes after a node dies (TestClusterKillOwnerOf100Chats): when each of
// the dead node's chat leases stops naming it, when each JetStream stream
// it led has a new leader, and when each chat's lease names a survivor.
// It only reads: leases by direct gets (answered by any replica, so also
// while a stream has no leader), stream leaders by stream info.
type failoverProbe struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	dead    string
	chats   []string
	streams []string
	led     []string // streams the dead node led at the kill
	held    int      // chats whose lease it held just before the kill

	mu       sync.Mutex
	killed   time.Time
	gone     map[string]time.Duration // chat → its lease no longer the dead node's
	adopted  map[string]time.Duration // chat → its lease a survivor's
	elected  map[string]time.Duration // stream → a leader other than the dead node
	stop     chan struct{}
	finished chan struct{}
}

// probeFailover connects to via's embedded NATS server (the nodes' route
// secret, derived from the token) before dead is killed; start begins
// the clock at the kill.
func probeFailover(t *testing.T, via cluster.NodeInfo, dead string, chats []string) *failoverProbe {
	t.Helper()
	nc, err := nats.Connect(via.NATS, nats.UserInfo("mirror", cluster.RouteSecret(e2eToken)), nats.Name("failover probe"))
	if err != nil {
		t.Fatalf("probe: connect to %s's NATS at %s: %v", via.Name, via.NATS, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &failoverProbe{nc: nc, js: js, dead: dead, chats: chats,
		streams: []string{cluster.RecordsStream, "KV_" + cluster.LeasesBucket, "KV_" + cluster.WorkBucket, "KV_" + cluster.NodesBucket},
		gone:    map[string]time.Duration{}, adopted: map[string]time.Duration{}, elected: map[string]time.Duration{},
		stop: make(chan struct{}), finished: make(chan struct{})}
	for _, s := range p.streams {
		if p.leader(s) == dead {
			p.led = append(p.led, s)
		}
	}
	if holders, err := p.leases(); err == nil {
		for _, c := range chats {
			if holders[c] == dead {
				p.held++
			}
		}
	}
	return p
}

// start begins watching; the kill happens right after.
func (p *failoverProbe) start() {
	p.killed = time.Now()
	go p.run()
}

func (p *failoverProbe) run() {
	defer close(p.finished)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.poll()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

func (p *failoverProbe) poll() {
	at := time.Since(p.killed)
	for _, s := range p.led {
		p.mu.Lock()
		_, done := p.elected[s]
		p.mu.Unlock()
		if done {
			continue
		}
		if l := p.leader(s); l != "" && l != p.dead {
			p.mu.Lock()
			p.elected[s] = time.Since(p.killed)
			p.mu.Unlock()
		}
	}
	holders, err := p.leases()
	if err != nil {
		return // no replica answered this time
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.chats {
		h := holders[c]
		if _, ok := p.gone[c]; !ok && h != p.dead {
			p.gone[c] = at
		}
		if _, ok := p.adopted[c]; !ok && h != "" && h != p.dead {
			p.adopted[c] = at
		}
	}
}

// leader is stream's leader as its info names it ("" when it has none or
// did not answer within a moment).
func (p *failoverProbe) leader(stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := p.js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	if ci := s.CachedInfo().Cluster; ci != nil {
		return ci.Leader
	}
	return ""
}

// leases reads every chat lease's holder in one direct get of the last
// message per subject (any replica answers).
func (p *failoverProbe) leases() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	prefix := "$KV." + cluster.LeasesBucket + ".chat."
	req, _ := json.Marshal(map[string]any{"multi_last": []string{prefix + ">"}})
	if err := p.nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+cluster.LeasesBucket, inbox, req); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, err
		}
		switch m.Header.Get("Status") {
		case "204", "404": // the end of the batch; no lease at all
			return out, nil
		case "":
		default:
			return nil, fmt.Errorf("direct get: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
		chat, _ := strings.CutPrefix(m.Header.Get("Nats-Subject"), prefix)
		// A deleted, purged or expired key (its marker) names nobody.
		if m.Header.Get("KV-Operation") == "" && m.Header.Get("Nats-Marker-Reason") == "" {
			out[chat] = string(m.Data)
		}
	}
}

// report stops the probe and says where the time went, given when the
// client saw each chat served (since the kill).
func (p *failoverProbe) report(served []time.Duration) string {
	close(p.stop)
	<-p.finished
	p.mu.Lock()
	defer p.mu.Unlock()
	span := func(m map[string]time.Duration) string {
		var ds []time.Duration
		for _, d := range m {
			ds = append(ds, d)
		}
		if len(ds) == 0 {
			return "never"
		}
		return fmt.Sprintf("%v–%v (%d)", slices.Min(ds).Round(10*time.Millisecond), slices.Max(ds).Round(10*time.Millisecond), len(ds))
	}
	var el []string
	for _, s := range p.led {
		if d, ok := p.elected[s]; ok {
			el = append(el, fmt.Sprintf("%s %v", s, d.Round(10*time.Millisecond)))
		} else {
			el = append(el, s+" not seen")
		}
	}
	if len(el) == 0 {
		el = []string{"none led by it"}
	}
	sv := map[string]time.Duration{}
	for i, d := range served {
		sv[p.chats[i]] = d
	}
	return fmt.Sprintf("%s held %d of the %d chats' leases before the kill; kill → leases gone %s; → stream leaders re-elected: %s; → chats adopted %s; → chats served %s",
		p.dead, p.held, len(p.chats), span(p.gone), strings.Join(el, ", "), span(p.adopted), span(sv))
}
