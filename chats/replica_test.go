package chats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// memLog is a RecordLog in memory with the same fence as the cluster's:
// one position counter for every chat (a stream's sequence), an append
// refused unless the chat's last position is at.
type memLog struct {
	mu   sync.Mutex
	pos  uint64
	recs map[string][]memEntry
	// down makes appends fail with ErrUnavailable; land stores the
	// flush anyway (a write that landed unconfirmed); inflight stores it
	// unseen by Read though it fences appends (a write still in flight
	// at the stream's leader) until show.
	down, land, inflight bool
	reads                []uint64 // the after of each Read
}

type memEntry struct {
	pos    uint64
	data   []byte // nil: a claim
	hidden bool   // in flight: not read yet
}

// show ends the log's outage: what was in flight is read from now on.
func (l *memLog) show() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down, l.land, l.inflight = false, false, false
	for _, r := range l.recs {
		for i := range r {
			r[i].hidden = false
		}
	}
}

func newMemLog() *memLog { return &memLog{recs: map[string][]memEntry{}} }

func (l *memLog) last(chat string) uint64 {
	if r := l.recs[chat]; len(r) > 0 {
		return r[len(r)-1].pos
	}
	return 0
}

// claim fences the chat as a new owner's claim does and returns its
// position.
func (l *memLog) claim(chat string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pos++
	l.recs[chat] = append(l.recs[chat], memEntry{pos: l.pos})
	return l.pos
}

func (l *memLog) Append(ctx context.Context, chat string, at uint64, f *Flush) (uint64, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	if _, err := DecodeFlush(chat, data); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last := l.last(chat); last != at {
		return 0, fmt.Errorf("%w (at %d, the log is at %d)", ErrFenced, at, last)
	}
	if l.down && !l.land && !l.inflight {
		return 0, fmt.Errorf("%w: test", ErrUnavailable)
	}
	l.pos++
	l.recs[chat] = append(l.recs[chat], memEntry{pos: l.pos, data: data, hidden: l.inflight})
	if l.down {
		return 0, fmt.Errorf("%w: test (landed)", ErrUnavailable)
	}
	return l.pos, nil
}

func (l *memLog) Read(ctx context.Context, chat string, after uint64, fn func(uint64, *Flush) error) (uint64, error) {
	l.mu.Lock()
	l.reads = append(l.reads, after)
	var recs []memEntry
	var last uint64
	for _, e := range l.recs[chat] {
		if !e.hidden {
			recs, last = append(recs, e), e.pos
		}
	}
	l.mu.Unlock()
	for _, e := range recs {
		if e.pos <= after || e.data == nil {
			continue
		}
		f, err := DecodeFlush(chat, e.data)
		if err != nil {
			return 0, err
		}
		if err := fn(e.pos, f); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// switchFence is a Fence a test turns off, or off for its next lapses
// answers only (a renewal that came late).
type switchFence struct {
	off    atomic.Bool
	lapses atomic.Int32
}

func (f *switchFence) Held() bool {
	if f.lapses.Load() > 0 && f.lapses.Add(-1) >= 0 {
		return false
	}
	return !f.off.Load()
}

// clusterEnv is a tool env in cluster mode on log, owning a new chat.
func clusterEnv(t *testing.T, log *memLog) (*env, string, *switchFence) {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"), log: log}
	e.start()
	t.Cleanup(e.stop)
	id := ids.NewChat()
	f := &switchFence{}
	if err := e.svc.Adopt(bg, id, f, log.claim(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.create(bg, id, "clustered", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	return e, id, f
}

// logPos is the LogPos bbolt holds for chat.
func (e *env) logPos(chat string) uint64 {
	e.t.Helper()
	var pos uint64
	if err := e.db.View(func(tx *bolt.Tx) error {
		c, _, err := loadChat(tx, chat)
		pos = c.LogPos
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return pos
}

// seqsOf says where evs, a record from seq 1, has a gap ("": none).
func seqsOf(evs []*Event) string {
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			return fmt.Sprintf("gap at %d (seq %d)", i+1, ev.Seq)
		}
	}
	return ""
}

// TestClusterNoToolWithoutFence: while an owner's fence does not hold
// (its lease lapsed), an approval's answer is refused (the question stays
// open) and the call does not run; a send is stored (the log's fence
// still holds) but starts no turn; once another node claimed the chat a
// send fails with ErrFenced, writes nothing, and the chat closes for its
// subscribers. The tool never runs.
func TestClusterNoToolWithoutFence(t *testing.T) {
	log := newMemLog()
	e, chat, fence := clusterEnv(t, log)
	s := newSub()
	if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, chat, `/tool shell {"command":"touch ran"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	before := len(e.durable(chat))
	fence.off.Store(true)
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("approval answered without the fence: %v, want ErrUnavailable", err)
	}
	if n := len(e.durable(chat)); n != before {
		t.Fatalf("%d rows written by a refused answer", n-before)
	}
	if _, err := e.svc.Send(bg, chat, "anyone?", "2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	if evs := e.durable(chat)[before:]; count(evs, EvTurnStarted) != 0 || count(evs, EvMessageAccepted) != 1 {
		t.Fatalf("rows without the fence: %s", typesOf(evs))
	}
	// Another node's claim fences the log: nothing more is written.
	log.claim(chat)
	n := len(e.durable(chat))
	if _, err := e.svc.Send(bg, chat, "still there?", "3", "", Origin{}); !errors.Is(err, ErrFenced) {
		t.Fatalf("send after another node's claim: %v, want ErrFenced", err)
	}
	if got := len(e.durable(chat)); got != n {
		t.Fatalf("%d rows written after another node's claim", got-n)
	}
	deadline := time.After(wait)
	for closed := false; !closed; {
		s.mu.Lock()
		for _, d := range s.got {
			closed = closed || d.Closed == chat
		}
		s.mu.Unlock()
		if !closed {
			select {
			case <-s.notify:
			case <-deadline:
				t.Fatal("the subscriber was not told the chat closed")
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tool ran without the fence: %v", err)
	}
}

// TestClusterUnconfirmedWriteThatLanded: a send whose append the store
// did not confirm fails and is not acknowledged; the write landed anyway,
// so the next operation reads the log's tail first: the message is there
// once (its client_id answers it), and seqs go on without a gap or a
// refused append of the chat's own.
func TestClusterUnconfirmedWriteThatLanded(t *testing.T) {
	log := newMemLog()
	e, chat, _ := clusterEnv(t, log)
	log.mu.Lock()
	log.down, log.land = true, true
	log.mu.Unlock()
	s := newSub()
	_, err := e.svc.Send(bg, chat, "did it land?", "k1", "", Origin{Sub: s, Req: "r1"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "nothing was accepted") {
		t.Fatalf("unconfirmed send: %v", err)
	}
	if len(s.events()) != 0 {
		t.Fatalf("the unconfirmed send's asker got %s", typesOf(s.events()))
	}
	if n := len(e.durable(chat)); n != 1 {
		t.Fatalf("bbolt holds %d rows, want only chat.created", n)
	}
	log.mu.Lock()
	log.down, log.land = false, false
	log.mu.Unlock()
	m, err := e.svc.Send(bg, chat, "did it land?", "k1", "", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "did it land?" || m.Seq != 2 {
		t.Fatalf("the landed message answered as %+v", m)
	}
	if _, err := e.svc.Send(bg, chat, "next", "k2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	// Both turns (the landed message's, answered again, and the next
	// one's) end before the record is compared with the log.
	e.twoTurnsAsLogged(log, chat)
}

// TestClusterOwnWriteInFlight: while an unconfirmed write of the owner
// is still in flight (it fences the log, though no read shows it yet), the
// owner's next write is refused as moved on; with its fence held that is
// its own write, not another node's claim: the send fails as unavailable
// and the chat stays this node's (before, it was dropped: nobody ran it
// while this node renewed its lease). Once the write lands the chat goes
// on from it: the first message once, then the next, seqs without a gap.
func TestClusterOwnWriteInFlight(t *testing.T) {
	log := newMemLog()
	e, chat, _ := clusterEnv(t, log)
	log.mu.Lock()
	log.down, log.inflight = true, true
	log.mu.Unlock()
	if _, err := e.svc.Send(bg, chat, "in flight", "k1", "", Origin{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unconfirmed send: %v, want ErrUnavailable", err)
	}
	_, err := e.svc.Send(bg, chat, "behind it", "k2", "", Origin{})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send behind the write in flight: %v, want ErrUnavailable", err)
	}
	if !e.svc.stillOwnedAny(chat) {
		t.Fatal("the chat was dropped though its fence holds")
	}
	log.show()
	if _, err := e.svc.Send(bg, chat, "behind it", "k2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	e.twoTurnsAsLogged(log, chat)
}

// twoTurnsAsLogged waits until chat's two turns ended, then checks its
// record: seqs without a gap, two messages accepted, and bbolt at the
// log's position.
func (e *env) twoTurnsAsLogged(log *memLog, chat string) {
	t := e.t
	t.Helper()
	var zero uint64
	done := newSub()
	if err := e.svc.Open(bg, chat, &zero, done, ""); err != nil {
		t.Fatal(err)
	}
	done.waitFor(t, "both turns", has(EvTurnFinished, 2))
	evs := e.durable(chat)
	if g := seqsOf(evs); g != "" {
		t.Fatalf("record %s: %s", typesOf(evs), g)
	}
	if n := count(evs, EvMessageAccepted); n != 2 {
		t.Fatalf("%d messages accepted, want 2: %s", n, typesOf(evs))
	}
	if got, want := e.logPos(chat), log.last(chat); got != want {
		t.Fatalf("bbolt applied position %d, the log is at %d", got, want)
	}
}

// stillOwnedAny says whether this node owns chat.
func (s *Service) stillOwnedAny(chat string) bool {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	return s.replica.m[chat] != nil
}

// TestClusterCatchUpResumesAtLogPos: a second node adopting a chat twice
// reads, the second time, only the flushes after the position its bbolt
// holds, applies each once, and ends with the owner's record and
// metadata; single-node rows carry no position.
func TestClusterCatchUpResumesAtLogPos(t *testing.T) {
	log := newMemLog()
	a, chat, _ := clusterEnv(t, log)
	b := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"), log: log}
	b.start()
	t.Cleanup(b.stop)
	move := func(from, to *env) {
		t.Helper()
		from.svc.Disown(chat)
		if err := to.svc.Adopt(bg, chat, &switchFence{}, log.claim(chat)); err != nil {
			t.Fatal(err)
		}
	}
	send := func(e *env, k string) {
		t.Helper()
		s := newSub()
		if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, chat, "message "+k, k, "", Origin{}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, "its turn", has(EvTurnFinished, 1))
		if err := e.svc.Unsubscribe(bg, chat, s); err != nil {
			t.Fatal(err)
		}
	}
	send(a, "1")
	move(a, b)
	send(b, "2")
	move(b, a)
	send(a, "3")
	held := b.logPos(chat)
	move(a, b)
	log.mu.Lock()
	reads := append([]uint64(nil), log.reads...)
	log.mu.Unlock()
	if got := reads[len(reads)-1]; got != held {
		t.Fatalf("the second adoption read after %d, bbolt held %d", got, held)
	}
	aEvs, bEvs := a.durable(chat), b.durable(chat)
	if len(bEvs) != len(aEvs) {
		t.Fatalf("B %s\nA %s", typesOf(bEvs), typesOf(aEvs))
	}
	for i := range aEvs {
		if string(aEvs[i].JSON()) != string(bEvs[i].JSON()) {
			t.Fatalf("row %d differs:\nA %s\nB %s", i+1, aEvs[i].JSON(), bEvs[i].JSON())
		}
	}
	if g := seqsOf(bEvs); g != "" {
		t.Fatal(g)
	}
	log.mu.Lock()
	var lastFlush uint64
	for _, e := range log.recs[chat] {
		if e.data != nil {
			lastFlush = e.pos
		}
	}
	log.mu.Unlock()
	bc, err := b.svc.Get(bg, chat)
	if err != nil || bc.LogPos != lastFlush || bc.Seq != uint64(len(bEvs)) {
		t.Fatalf("B's chat %+v %v (the log's last flush at %d)", bc, err, lastFlush)
	}

	single := newEnv(t, newGate(true))
	c := single.chat()
	if single.logPos(c.ID) != 0 {
		t.Fatal("a single-node chat has a log position")
	}
}

// ledgerPut is a flush's ledger writes: a change with its previous bytes
// and one without, and a forgotten key.
const ledgerPut = `{"put":[{"key":3,"turn":2,"call_id":"k","path":"d/a.txt","status":"modified","size_before":2,"size_after":4,"mode":420,"time":"2026-01-01T00:00:00Z","prior":"aGk="},` +
	`{"key":4,"turn":2,"call_id":"k","path":"b","status":"created","size_before":0,"size_after":1,"time":"2026-01-01T00:00:00Z"}],"forget":[1]}`

// TestDecodeFlush: what a flush must be to be read back.
func TestDecodeFlush(t *testing.T) {
	ev := func(chat string, seq uint64) string {
		return string(NewEvent(chat, seq, time.Unix(1700000000, 0).UTC(), &TurnFailed{Error: "x"}).JSON())
	}
	meta := func(chat string, seq uint64) string { return fmt.Sprintf(`{"id":%q,"seq":%d}`, chat, seq) }
	for _, c := range []struct {
		name, data string
		ok         bool
	}{
		{"good", `{"chat":"c_f","events":[` + ev("c_f", 1) + `,` + ev("c_f", 2) + `],"meta":` + meta("c_f", 2) + `}`, true},
		{"metadata only", `{"chat":"c_f","meta":` + meta("c_f", 7) + `}`, true},
		{"another chat", `{"chat":"c_g","meta":` + meta("c_g", 1) + `}`, false},
		{"metadata of another chat", `{"chat":"c_f","meta":` + meta("c_g", 1) + `}`, false},
		{"event of another chat", `{"chat":"c_f","events":[` + ev("c_g", 1) + `],"meta":` + meta("c_f", 1) + `}`, false},
		{"seqs out of order", `{"chat":"c_f","events":[` + ev("c_f", 2) + `,` + ev("c_f", 1) + `],"meta":` + meta("c_f", 2) + `}`, false},
		{"event past the chat's seq", `{"chat":"c_f","events":[` + ev("c_f", 3) + `],"meta":` + meta("c_f", 2) + `}`, false},
		{"null event", `{"chat":"c_f","events":[null],"meta":` + meta("c_f", 2) + `}`, false},
		{"unknown field", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"extra":1}`, false},
		{"unknown metadata field", `{"chat":"c_f","meta":{"id":"c_f","nope":1}}`, false},
		{"trailing data", `{"chat":"c_f","meta":` + meta("c_f", 1) + `} {}`, false},
		{"empty client id", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"client_ids":[["","m_1"]]}`, false},
		{"pending without id", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"put_pending":[{"text":"x"}]}`, false},
		{"not an object", `[]`, false},
		{"purge", `{"chat":"c_f","meta":` + meta("c_f", 7) + `,"purge":true}`, true},
		{"purge with events", `{"chat":"c_f","events":[` + ev("c_f", 1) + `],"meta":` + meta("c_f", 2) + `,"purge":true}`, false},
		{"purge with pending", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"purge":true,"del_pending":["m_1"]}`, false},
		{"purge with a creator", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"purge":true,"creator":"p_1"}`, false},
		{"purge not a bool", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"purge":1}`, false},
		{"ledger", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":` + ledgerPut + `}`, true},
		{"ledger forget", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{"forget":[1,4]}}`, true},
		{"ledger null", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":null}`, true},
		{"ledger empty", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{}}`, false},
		{"ledger unknown field", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{"put":[],"drop":[1]}}`, false},
		{"ledger row unknown field", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{"put":[{"key":1,"path":"a","status":"created","time":"2026-01-01T00:00:00Z","blob":"AA=="}]}}`, false},
		{"ledger path outside", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{"put":[{"key":1,"path":"../a","status":"created","time":"2026-01-01T00:00:00Z"}]}}`, false},
		{"ledger forget zero", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"ledger":{"forget":[0]}}`, false},
		{"purge with ledger", `{"chat":"c_f","meta":` + meta("c_f", 1) + `,"purge":true,"ledger":{"forget":[1]}}`, false},
	} {
		_, err := DecodeFlush("c_f", []byte(c.data))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// FuzzDecodeFlush: whatever bytes a log message holds, decoding either
// fails (ErrBadInput) or gives a flush of the chat whose events have
// increasing seqs within its metadata's, and that encodes back to one
// that decodes the same.
func FuzzDecodeFlush(f *testing.F) {
	ev := string(NewEvent("c_f", 1, time.Unix(1700000000, 0).UTC(), &MessageAccepted{Message: &Message{ID: "m_1", Text: "hi"}}).JSON())
	f.Add([]byte(`{"chat":"c_f","events":[` + ev + `],"meta":{"id":"c_f","seq":1},"put_pending":[{"id":"m_1","text":"hi"}],"client_ids":[["k","m_1"]]}`))
	f.Add([]byte(`{"chat":"c_f","meta":{"id":"c_f","seq":3},"del_pending":["m_1"],"outputs":[["h","out"]]}`))
	f.Add([]byte(`{"chat":"c_f","meta":{"id":"c_f","seq":9},"archive":{"boundary":9,"from":1,"through":8,"reason":"x","time":"2026-01-01T00:00:00Z","record":"r"}}`))
	f.Add([]byte(`{"chat":"c_f","events":[null],"meta":{"id":"c_f"}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"chat":"c_f","meta":{"id":"c_f","seq":4},"purge":true}`))
	f.Add([]byte(`{"chat":"c_f","meta":{"id":"c_f","seq":4},"ledger":` + ledgerPut + `}`))
	f.Add([]byte(`{"chat":"c_f","meta":{"id":"c_f","seq":4},"ledger":{"forget":[2,9]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := DecodeFlush("c_f", data)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("error not ErrBadInput: %v", err)
			}
			return
		}
		if fl.Chat != "c_f" || fl.Meta.ID != "c_f" {
			t.Fatalf("accepted a flush of another chat: %s", data)
		}
		for i, e := range fl.Events {
			if e.Chat != "c_f" || e.Seq == 0 || e.Seq > fl.Meta.Seq || i > 0 && e.Seq <= fl.Events[i-1].Seq {
				t.Fatalf("accepted events out of order: %s", data)
			}
		}
		again, err := json.Marshal(fl)
		if err != nil {
			t.Fatal(err)
		}
		if fl.Ledger != nil && (fl.Ledger.Empty() || fl.Ledger.Check() != nil) {
			t.Fatalf("accepted ledger writes that fail their check: %s", data)
		}
		if fl.Purge && (len(fl.Events) > 0 || len(fl.PutPending) > 0 || fl.Archive != nil || fl.Ledger != nil) {
			t.Fatalf("accepted a purge that writes the chat: %s", data)
		}
		fl2, err := DecodeFlush("c_f", again)
		if err != nil || len(fl2.Events) != len(fl.Events) || fl2.Last() != fl.Last() || fl2.Purge != fl.Purge ||
			fmt.Sprint(fl2.Ledger) != fmt.Sprint(fl.Ledger) {
			t.Fatalf("re-encoded flush %s: %v", again, err)
		}
	})
}

// TestClusterLocalWriteFailsAfterTheLog: bbolt refuses a flush the log
// confirmed: the send fails, and the next operation applies that flush
// from the log before anything else, so the chat's bbolt never misses a
// flush the log holds and seqs go on from it.
func TestClusterLocalWriteFailsAfterTheLog(t *testing.T) {
	log := newMemLog()
	e, chat, _ := clusterEnv(t, log)
	var fail atomic.Bool
	fail.Store(true)
	e.store.commitHook = func() error {
		if fail.CompareAndSwap(true, false) {
			return errors.New("disk full")
		}
		return nil
	}
	if _, err := e.svc.Send(bg, chat, "in the log only", "k1", "", Origin{}); err == nil {
		t.Fatal("a send whose bbolt write failed succeeded")
	}
	m, err := e.svc.Send(bg, chat, "in the log only", "k1", "", Origin{})
	if err != nil || m.Seq != 2 {
		t.Fatalf("resend after the failed write: %+v %v", m, err)
	}
	var zero uint64
	done := newSub()
	if err := e.svc.Open(bg, chat, &zero, done, ""); err != nil {
		t.Fatal(err)
	}
	done.waitFor(t, "the message's turn", has(EvTurnFinished, 1))
	evs := e.durable(chat)
	if g := seqsOf(evs); g != "" || count(evs, EvMessageAccepted) != 1 {
		t.Fatalf("record %s %s", typesOf(evs), g)
	}
}

// TestClusterTurnStartsAfterALapse: a fence that did not hold for a
// moment when a message came (its renewal was late) starts the message's
// turn once it holds again, with nothing else asking.
func TestClusterTurnStartsAfterALapse(t *testing.T) {
	log := newMemLog()
	e, chat, fence := clusterEnv(t, log)
	s := newSub()
	if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	fence.lapses.Store(1) // the check before the turn starts
	if _, err := e.svc.Send(bg, chat, "hello", "k1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the turn after the lapse", has(EvTurnFinished, 1))
}

// TestFlushBytesKeepWithoutPurge: a flush that is not a purge encodes as
// before the purge field existed (no "purge" key), so the log's existing
// messages and new ones read the same on every version; a purge says so.
func TestFlushBytesKeepWithoutPurge(t *testing.T) {
	for _, c := range []struct {
		f    Flush
		keys string
	}{
		{Flush{Chat: "c_f", Meta: Chat{ID: "c_f", Seq: 2}, DelPending: []string{"m_1"}}, "[chat del_pending meta]"},
		{Flush{Chat: "c_f", Meta: Chat{ID: "c_f", Seq: 2}, Purge: true}, "[chat meta purge]"},
		{Flush{Chat: "c_f", Meta: Chat{ID: "c_f", Seq: 2}, Ledger: &tools.LedgerWrites{Forget: []uint64{1}}}, "[chat ledger meta]"},
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(Marshal(&c.f), &m); err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(maps.Keys(m))
		if fmt.Sprint(keys) != c.keys {
			t.Errorf("keys %v, want %s", keys, c.keys)
		}
	}
}
