package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The issue's tests 2–9 (issue 21, "Tests must prove") with real `mirror
// serve --cluster` processes on 127.0.0.1: kill -9 and SIGSTOP are real.
// Each test names the sentence it proves.

// TestClusterChats runs the tests that kill nothing on one cluster of three:
// 2 (concurrent sends through three nodes), 4 (clients on other nodes,
// resume by since) and 6 (edit and delete racing the pickup).
func TestClusterChats(t *testing.T) {
	c := startE2E(t, e2eOpts{})
	t.Run("2 concurrent sends through three nodes", func(t *testing.T) { clusterConcurrentSends(t, c) })
	t.Run("4 clients on other nodes resume by since", func(t *testing.T) { clusterResume(t, c) })
	t.Run("6 edit and delete racing the pickup", func(t *testing.T) { clusterPickupRace(t, c) })
}

// clusterConcurrentSends is test 2: 200 concurrent sends to one chat
// through three nodes: one owner, every message stored once, no gap in seq.
func clusterConcurrentSends(t *testing.T, c *e2eCluster) {
	const n = 200
	var socks []*e2eSock
	for _, nd := range c.nodes {
		socks = append(socks, dialNode(t, nd), dialNode(t, nd))
	}
	chat := socks[0].create("two hundred")
	// A watcher on the last node sees the turns end.
	watch := dialNode(t, c.nodes[len(c.nodes)-1])
	if f := watch.must(map[string]any{"type": "chat.open", "chat": chat}); f.typ() != "chat.snapshot" {
		t.Fatalf("chat.open answered %v", f)
	}

	// While the sends go, no two nodes ever hold the chat's lease.
	stop := make(chan struct{})
	owners := make(chan string, 1)
	go func() {
		defer close(owners)
		most, seen := 0, ""
		for {
			select {
			case <-stop:
				owners <- seen
				return
			default:
			}
			st, ok := c.status(c.nodes[0])
			if ok {
				total := 0
				for _, x := range st.Nodes {
					total += x.Chats
				}
				if total > most {
					most = total
				}
				if total > 1 {
					seen = fmt.Sprintf("%d chat leases held at once: %+v", total, st.Nodes)
				}
			}
			select {
			case <-stop:
				owners <- seen
				return
			case <-time.After(100 * time.Millisecond): // the polling period, not a synchronisation
			}
		}
	}()

	type answer struct {
		i  int
		f  frame
		by string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := socks[i%len(socks)]
			f, err := s.try(map[string]any{"type": "message.send", "chat": chat, "text": fmt.Sprintf("m-s%d", i), "client_id": fmt.Sprintf("c%d", i)}, e2eWait)
			if err != nil {
				f = frame{"type": "error", "message": err.Error()}
			}
			answers[i] = answer{i, f, s.node}
		}()
	}
	wg.Wait()
	ids := map[string]int{}
	for _, a := range answers {
		if a.f.typ() != "message.accepted" {
			close(stop)
			t.Fatalf("send %d through %s answered %v%s", a.i, a.by, a.f, c.logs())
		}
		id := a.f.obj("message").str("id")
		if j, dup := ids[id]; dup {
			t.Fatalf("sends %d and %d were both answered with message %s", j, a.i, id)
		}
		ids[id] = a.i
	}
	// Every message is picked up and the last turn ends.
	watch.wait("every message picked and the last turn finished", e2eWait, func(fs []frame) bool {
		fs = ofChat(fs, chat)
		picked := count(fs, chat, "message.picked")
		return picked == n && count(fs, chat, "turn.started") == count(fs, chat, "turn.finished")
	})
	close(stop)
	if bad := <-owners; bad != "" {
		t.Fatalf("more than one owner: %s", bad)
	}

	// Every node reads the same record: seq 1, 2, 3… and each message once.
	var first []string
	for _, nd := range c.nodes {
		rec := readRecord(t, nd.name, nd.p.addr, chat)
		checkSeqs(t, nd.name, rec)
		stored := map[string]int{}
		picked := map[string]int{}
		answeredIn := map[string]int{}
		for _, e := range rec {
			switch e.typ() {
			case "message.accepted":
				stored[e.obj("message").str("client_id")]++
				if _, ok := ids[e.obj("message").str("id")]; !ok {
					t.Fatalf("%s: stored message %v was never acknowledged", nd.name, e.obj("message"))
				}
			case "message.picked":
				picked[e.obj("message").str("id")]++
			case "turn.finished":
				for _, w := range strings.Fields(e.str("reply")) {
					if strings.HasPrefix(w, "m-s") {
						answeredIn[w]++
					}
				}
			}
		}
		for i := range n {
			if k := stored[fmt.Sprintf("c%d", i)]; k != 1 {
				t.Fatalf("%s: message c%d stored %d times", nd.name, i, k)
			}
			if k := answeredIn[fmt.Sprintf("m-s%d", i)]; k != 1 {
				t.Fatalf("%s: m-s%d answered %d times", nd.name, i, k)
			}
		}
		for id := range ids {
			if picked[id] != 1 {
				t.Fatalf("%s: message %s picked %d times", nd.name, id, picked[id])
			}
		}
		if sh := shape(rec); first == nil {
			first = sh
		} else if !slices.Equal(first, sh) {
			t.Fatalf("%s reads another record than %s:\n%v\n%v", nd.name, c.nodes[0].name, sh, first)
		}
	}
	t.Logf("200 sends through %d sockets on 3 nodes: %d events, seq without gap on every node", len(socks), len(first))
}

// clusterResume is test 4: clients connected to other nodes keep receiving
// events and, reopening with since, get exactly what they missed, then
// live text.
func clusterResume(t *testing.T, c *e2eCluster) {
	owner := dialNode(t, c.nodes[0])
	chat := owner.create("resume")
	if f := owner.must(map[string]any{"type": "chat.open", "chat": chat}); f.typ() != "chat.snapshot" {
		t.Fatalf("chat.open answered %v", f)
	}
	other := dialNode(t, c.nodes[1])
	if f := other.must(map[string]any{"type": "chat.open", "chat": chat}); f.typ() != "chat.snapshot" {
		t.Fatalf("chat.open answered %v", f)
	}
	// Live: the client on another node sees the owner's events.
	owner.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-r1", "client_id": "r1"})
	other.wait("m-r1 answered, seen on "+other.node, e2eWait, answered(chat, "m-r1"))
	got := ofChat(other.snapshot(), chat)
	last := 0
	for _, f := range got {
		if f["seq"] != nil && f.typ() != "reply.delta" && f.typ() != "chat.snapshot" {
			if f.seq() <= last {
				t.Fatalf("%s received seq %d after %d: %v", other.node, f.seq(), last, shape(got))
			}
			last = f.seq()
		}
	}
	other.close()

	// Missed: turns while the client is away, then a turn that holds its
	// reply halfway.
	owner.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-r2", "client_id": "r2"})
	owner.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-r3", "client_id": "r3"})
	owner.wait("m-r2 and m-r3 answered", e2eWait, func(fs []frame) bool { return answered(chat, "m-r2")(fs) && answered(chat, "m-r3")(fs) })
	c.llm.setGate(false)
	defer c.llm.setGate(true)
	owner.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-r4 HOLD", "client_id": "r4"})
	owner.wait("the held reply's first text", e2eWait, func(fs []frame) bool {
		for _, f := range ofChat(fs, chat) {
			if f.typ() == "reply.delta" && strings.Contains(f.str("text"), "partial m-r4") {
				return true
			}
		}
		return false
	})

	// Reopened on the third node with since: exactly the missed events.
	back := dialNode(t, c.nodes[2])
	back.must(map[string]any{"type": "chat.open", "chat": chat, "since": last})
	back.wait("chat.resumed", e2eWait, func(fs []frame) bool { return hasType(fs, "chat.resumed") })
	var missed []frame
	var resumed frame
	for _, f := range back.snapshot() {
		if f.typ() == "chat.resumed" {
			resumed = f
			break
		}
		if f.chatID() == chat && f["seq"] != nil && f.typ() != "reply.delta" {
			missed = append(missed, f)
		}
	}
	rec := readRecord(t, c.nodes[0].name, c.nodes[0].p.addr, chat)
	var want []frame
	for _, e := range rec {
		if e.seq() > last && e.seq() <= resumed.seq() {
			want = append(want, e)
		}
	}
	if !slices.Equal(shape(missed), shape(want)) || len(want) == 0 {
		t.Fatalf("reopened with since %d on %s: got %v, want exactly the missed %v (resumed at seq %d)", last, back.node, shape(missed), shape(want), resumed.seq())
	}
	for _, m := range []string{"m-r2", "m-r3"} {
		if !answered(chat, m)(missed) {
			t.Fatalf("the missed events lack the turn answering %s: %v", m, shape(missed))
		}
	}
	// Then live text: the held reply so far (in chat.resumed's running or
	// as a delta), and the rest as it comes.
	if running := resumed.obj("running"); !strings.Contains(running.str("text"), "partial m-r4") {
		back.wait("the held reply's first text, live", e2eWait, func(fs []frame) bool {
			for _, f := range ofChat(fs, chat) {
				if f.typ() == "reply.delta" && strings.Contains(f.str("text"), "partial m-r4") {
					return true
				}
			}
			return false
		})
	}
	c.llm.setGate(true)
	back.wait("the rest of the held reply, live", e2eWait, func(fs []frame) bool {
		for _, f := range ofChat(fs, chat) {
			if f.typ() == "reply.delta" && strings.Contains(f.str("text"), "and the rest") {
				return answered(chat, "m-r4")(fs)
			}
		}
		return false
	})
}

// answered reports whether a turn.finished of chat among the frames
// answers marker (the fake model quotes it).
func answered(chat, marker string) func([]frame) bool {
	return func(fs []frame) bool {
		for _, f := range fs {
			if f.typ() == "turn.finished" && f.chatID() == chat && slices.Contains(strings.Fields(f.str("reply")), marker) {
				return true
			}
		}
		return false
	}
}

func hasType(fs []frame, typ string) bool {
	for _, f := range fs {
		if f.typ() == typ {
			return true
		}
	}
	return false
}

// clusterPickupRace is test 6: an edit or delete of a queued message
// racing its pickup is decided once, and every node sees the same answer.
func clusterPickupRace(t *testing.T, c *e2eCluster) {
	const rounds = 8
	a := dialNode(t, c.nodes[0])
	chat := a.create("race")
	b := dialNode(t, c.nodes[1])
	d := dialNode(t, c.nodes[2])
	type outcome struct{ edit, del frame }
	outcomes := map[string]outcome{}
	for r := range rounds {
		// A held turn keeps the next message queued until the gate opens.
		c.llm.setGate(false)
		hold := fmt.Sprintf("m-h%d HOLD", r)
		a.must(map[string]any{"type": "message.send", "chat": chat, "text": hold, "client_id": fmt.Sprintf("h%d", r)})
		c.llm.waitFor(t, "the held turn", e2eWait, func() bool { return c.llm.asked[fmt.Sprintf("m-h%d", r)] > 0 && c.llm.held > 0 })
		q := b.must(map[string]any{"type": "message.send", "chat": chat, "text": fmt.Sprintf("m-q%d", r), "client_id": fmt.Sprintf("q%d", r)})
		id := q.obj("message").str("id")
		// Open the gate and race: an edit through one node, a delete
		// through another, against the pickup by the owner.
		var wg sync.WaitGroup
		var o outcome
		wg.Add(2)
		go func() {
			defer wg.Done()
			o.edit = b.call(map[string]any{"type": "message.edit", "chat": chat, "message": id, "text": fmt.Sprintf("m-q%d edited", r)}, e2eWait)
		}()
		go func() {
			defer wg.Done()
			if r%2 == 1 {
				o.del = d.call(map[string]any{"type": "message.delete", "chat": chat, "message": id}, e2eWait)
			}
		}()
		c.llm.setGate(true)
		wg.Wait()
		outcomes[id] = o
		// The round is over once nothing runs and nothing waits.
		waitIdle(t, c, chat)
	}
	tally := map[string]int{}
	for _, o := range outcomes {
		tally["edit "+o.edit.typ()+" "+o.edit.str("code")]++
		if o.del != nil {
			tally["delete "+o.del.typ()+" "+o.del.str("code")]++
		}
	}
	t.Logf("%d rounds: %v", rounds, tally)
	// Every node reads the same record, and it agrees with the answers.
	var first []string
	for _, nd := range c.nodes {
		rec := readRecord(t, nd.name, nd.p.addr, chat)
		checkSeqs(t, nd.name, rec)
		if sh := shape(rec); first == nil {
			first = sh
		} else if !slices.Equal(first, sh) {
			t.Fatalf("%s reads another record than %s:\n%v\n%v", nd.name, c.nodes[0].name, sh, first)
		}
		for id, o := range outcomes {
			var picked, deleted, updated int
			var pickedText string
			for _, e := range rec {
				if e.obj("message").str("id") != id {
					continue
				}
				switch e.typ() {
				case "message.picked":
					picked++
					pickedText = e.obj("message").str("text")
				case "message.deleted":
					deleted++
				case "message.updated":
					updated++
				}
			}
			editOK := o.edit.typ() == "message.updated"
			delOK := o.del != nil && o.del.typ() == "message.deleted"
			for _, f := range []frame{o.edit, o.del} {
				if f != nil && f.typ() == "error" && f.str("code") != "in_use" && f.str("code") != "not_found" {
					t.Fatalf("%s: an answer of the race is %v", nd.name, f)
				}
			}
			switch {
			case picked+deleted != 1:
				t.Fatalf("%s: message %s picked %d and deleted %d times (answers %v / %v)", nd.name, id, picked, deleted, o.edit, o.del)
			case delOK != (deleted == 1):
				t.Fatalf("%s: the delete was answered %v, the record deleted it %d times", nd.name, o.del, deleted)
			case editOK != (updated == 1):
				t.Fatalf("%s: the edit was answered %v, the record updated it %d times", nd.name, o.edit, updated)
			case picked == 1 && editOK != strings.HasSuffix(pickedText, "edited"):
				t.Fatalf("%s: picked %q after the edit was answered %v", nd.name, pickedText, o.edit)
			}
		}
	}
}

// waitIdle waits until chat is idle with nothing pending, as its owner
// reports through node 1.
func waitIdle(t *testing.T, c *e2eCluster, chat string) {
	t.Helper()
	s := dialNode(t, c.nodes[0])
	defer s.close()
	deadline := time.Now().Add(e2eWait)
	for {
		f := s.must(map[string]any{"type": "chat.open", "chat": chat})
		ch := f.obj("chat")
		if f.typ() == "chat.snapshot" && ch.str("state") == "idle" && ch["pending"] == float64(0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat %s not idle within %v: %v", chat, e2eWait, ch)
		}
		s.must(map[string]any{"type": "chat.close", "chat": chat})
		time.Sleep(50 * time.Millisecond) // polling a state, bounded
	}
}
