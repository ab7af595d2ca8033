package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// The harness of the cluster process tests (cluster_e2e_test.go): real
// `mirror serve --cluster` processes on 127.0.0.1 asking one fake
// OpenAI-compatible model, and WebSocket clients on each node.

const e2eToken = "test-token-0123456789abcdef"

// e2eWait bounds every single wait of the cluster process tests.
const e2eWait = 60 * time.Second

// ---- the fake model ----

// fakeLLM is an OpenAI-compatible chat-completions server the nodes ask.
// Each node asks it under its own path prefix (/NODE/v1), so the fake
// knows which node asked. It answers the person's words it finds at the
// end of the conversation, the messages starting with a marker "m-…":
//
//   - "m-X" is answered "echo m-X" (every marker of the trailing messages);
//   - "m-X HOLD" first streams "partial m-X " and then waits, while the
//     gate is closed, for release (or for the asking process to die);
//   - "m-X SHELL: CMD" is answered with one call of shell running CMD, in
//     which "{node}" is the asking node's name; once the conversation ends
//     with the call's result the answer is "done m-X".
type fakeLLM struct {
	srv *httptest.Server

	mu       sync.Mutex
	changed  chan struct{}
	open     bool           // the gate: HOLD answers wait while it is closed
	requests int            // requests received
	held     int            // requests waiting at the gate now
	asked    map[string]int // marker → requests that carried it
	answered map[string]int // marker → answers written whole
	byNode   map[string]int // node → requests
	calls    int            // tool calls answered
	// limit, when set, is the per-minute token quota every answer reports
	// (x-ratelimit-limit-tokens); bills are the requests received, each
	// billed the tokens of its messages' text (tiktoken, as Mirror counts).
	limit int
	bills []llmBill
	// bodies, when set, is given every request's body with the node
	// that sent it (under mu).
	bodies func(node string, body []byte)
}

// llmBill is one request as the fake model billed it.
type llmBill struct {
	at     time.Time
	node   string
	tokens int
}

func newFakeLLM(t testing.TB) *fakeLLM {
	f := &fakeLLM{changed: make(chan struct{}), open: true, asked: map[string]int{}, answered: map[string]int{}, byNode: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the base_url node should use.
func (f *fakeLLM) url(node string) string { return f.srv.URL + "/" + node + "/v1" }

func (f *fakeLLM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// setGate opens (true) or closes the gate of HOLD answers.
func (f *fakeLLM) setGate(open bool) {
	f.mu.Lock()
	f.open = open
	f.notifyLocked()
	f.mu.Unlock()
}

// waitFor waits (bounded) until cond, run under the lock, holds.
func (f *fakeLLM) waitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(limit)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("model: timed out (%v) waiting for %s; %d requests, %d held, by node %v", limit, what, f.requests, f.held, f.byNode)
		}
	}
}

var markerRE = regexp.MustCompile(`^m-[A-Za-z0-9_.-]+`)

type llmMessage struct {
	Role      string            `json:"role"`
	Content   json.RawMessage   `json:"content"`
	ToolCalls []json.RawMessage `json:"tool_calls"`
}

func (m llmMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type, Text string
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	node, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if rest != "v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []llmMessage `json:"messages"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.bodies != nil {
		f.bodies(node, body)
	}
	f.mu.Unlock()
	// The trailing group: the person's messages since the last final
	// answer, past the tool steps of the turn.
	var texts []string
	// After a tool's result (a resumed turn adds its runtime context, a
	// message without a marker, after it).
	afterTool := false
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "user" && !markerRE.MatchString(m.text()) || m.Role == "system" {
			continue
		}
		afterTool = m.Role == "tool"
		break
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "assistant" && len(m.ToolCalls) == 0 {
			break
		}
		if m.Role == "user" {
			if t := m.text(); markerRE.MatchString(t) {
				texts = append([]string{t}, texts...)
			}
		}
	}
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.text())
	}
	billed := tokens.Count(all.String())
	var markers []string
	hold, shell := false, ""
	for _, t := range texts {
		markers = append(markers, markerRE.FindString(t))
		if strings.Contains(t, " HOLD") {
			hold = true
		}
		if _, cmd, ok := strings.Cut(t, " SHELL: "); ok {
			shell = strings.ReplaceAll(cmd, "{node}", node)
		}
	}
	f.mu.Lock()
	if f.limit > 0 {
		w.Header().Set("x-ratelimit-limit-tokens", fmt.Sprint(f.limit))
		w.Header().Set("x-ratelimit-reset-tokens", "1m0s")
	}
	f.bills = append(f.bills, llmBill{at: time.Now(), node: node, tokens: billed})
	f.requests++
	f.byNode[node]++
	for _, m := range markers {
		f.asked[m]++
	}
	f.notifyLocked()
	f.mu.Unlock()
	tag := strings.Join(markers, " ")
	if afterTool {
		providertest.StreamOpenAI(w, "done "+tag, nil, billed, 5)
		f.finish(markers)
		return
	}
	if hold {
		w.Header().Set("Content-Type", "text/event-stream")
		if shell == "" {
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "partial " + tag + " "}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		w.(http.Flusher).Flush()
		if !f.gate(r) {
			return // the asking process died: nothing was answered
		}
	}
	if shell != "" {
		args, _ := json.Marshal(map[string]string{"command": shell})
		f.mu.Lock()
		f.calls++
		id := fmt.Sprintf("call_%d", f.calls)
		f.mu.Unlock()
		providertest.StreamOpenAI(w, "", []provider.ToolCall{{ID: id, Name: "shell", Arguments: string(args)}}, billed, 5)
	} else {
		text := "echo " + tag
		if hold {
			text = "and the rest: echo " + tag
		}
		providertest.StreamOpenAI(w, text, nil, billed, 5)
	}
	f.finish(markers)
}

// gate waits while the gate is closed; false when the request ended first.
func (f *fakeLLM) gate(r *http.Request) bool {
	f.mu.Lock()
	f.held++
	f.notifyLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.held--
		f.notifyLocked()
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		open, ch := f.open, f.changed
		f.mu.Unlock()
		if open {
			return true
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return false
		}
	}
}

func (f *fakeLLM) finish(markers []string) {
	f.mu.Lock()
	for _, m := range markers {
		f.answered[m]++
	}
	f.notifyLocked()
	f.mu.Unlock()
}

// ---- the nodes ----

// e2eOpts shapes a test cluster.
type e2eOpts struct {
	n        int
	leaseTTL string
	// extra is appended to every node's runtime.yaml; node is its name.
	extra func(node string) string
	env   []string // added to every process's environment
	// bin is the mirror binary the nodes run ("": this test binary,
	// which doubles as it).
	bin string
}

// e2eCluster is a cluster of real `mirror serve --cluster` processes,
// their fake model and their one shared workspace.
type e2eCluster struct {
	t     *testing.T
	nodes []*clusterNode
	llm   *fakeLLM
	work  string
	env   []string
	bin   string // the nodes' binary: e2eOpts.bin
	// earlier are the logs of nodes' processes killed and started again
	// (keepLogs).
	earlier map[*clusterNode][]string
}

// startE2E starts the cluster and waits until it is ready: a leader, every
// node's heartbeat, and the shared workspace confirmed on every node.
func startE2E(t *testing.T, o e2eOpts) *e2eCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of gateways")
	}
	if o.n == 0 {
		o.n = 3
	}
	if o.leaseTTL == "" {
		// The default: shorter leases make failover faster, but a loaded
		// two-core machine then misses renewals and chats move by themselves.
		o.leaseTTL = "5s"
	}
	c := &e2eCluster{t: t, llm: newFakeLLM(t), work: t.TempDir(), env: o.env, bin: o.bin}
	routes := make([]string, o.n)
	for i := range routes {
		routes[i] = clustertest.RouteAddr(t)
	}
	for i := range o.n {
		dir := t.TempDir()
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		nd := &clusterNode{name: fmt.Sprintf("n%d", i+1), cfg: filepath.Join(dir, "runtime.yaml"), data: filepath.Join(dir, "data")}
		y := fmt.Sprintf(`cluster:
  name: %s
  listen: 127.0.0.1:0
  routes: %s
  peers: [%s]
  lease_ttl: %s
providers: [{name: fake, kind: openai, base_url: %s}]
models: [{name: default, provider: fake, model: fake-model, window: 128000}]
chains: {default: [default]}
tools:
  workspace: %s
  policies: {shell: allow}
limits: {messages_per_minute: 100000000, pending_per_chat: 1000, provider_concurrency: 512}
`, nd.name, routes[i], strings.Join(peers, ", "), o.leaseTTL, c.llm.url(nd.name), c.work)
		if o.extra != nil {
			y += o.extra(nd.name)
		}
		if err := os.WriteFile(nd.cfg, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		c.start(nd)
	}
	// MIRROR_E2E_LOGS=DIR keeps every node's whole log there (the failure
	// messages show only their ends).
	if dir := os.Getenv("MIRROR_E2E_LOGS"); dir != "" {
		t.Cleanup(func() {
			for _, nd := range c.nodes {
				if nd.p != nil {
					_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+nd.name+".log"), nd.p.errs.Bytes(), 0o600)
				}
			}
		})
	}
	c.waitReady(e2eWait, len(c.nodes))
	return c
}

// productBinary is the mirror binary as users build it, without the race
// detector: this test binary when it runs without it, else this package
// built into dir. A test of the product's speed runs its nodes on it (the
// race detector makes the gateway several times slower, and that time is
// not the product's); every other test runs them on this test binary.
func productBinary(t *testing.T, dir string) string {
	t.Helper()
	if !raceEnabled {
		return os.Args[0]
	}
	out := filepath.Join(dir, "mirror")
	started := time.Now()
	cmd := exec.Command("go", "build", "-o", out, ".")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	t.Logf("built the mirror binary without the race detector in %v", time.Since(started).Round(time.Millisecond))
	return out
}

// start runs nd's process (again, after a kill: same data and ports).
func (c *e2eCluster) start(nd *clusterNode) {
	c.t.Helper()
	bin := c.bin
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin, "serve", "--cluster", "--config", nd.cfg, "--data", nd.data, "--addr", "127.0.0.1:0")
	cmd.Dir = filepath.Dir(nd.cfg)
	cmd.Env = append(os.Environ(), append([]string{"MIRROR_AS_MAIN=1", "MIRROR_TOKEN=" + e2eToken}, c.env...)...)
	nd.p = startCmd(c.t, cmd)
}

// waitReady waits until every live node sees n nodes up with a leader and
// a shared workspace (each node answers for itself whether it is ready).
func (c *e2eCluster) waitReady(limit time.Duration, n int) cluster.Status {
	c.t.Helper()
	var st cluster.Status
	seen := false
	for _, nd := range c.nodes {
		if c.alive(nd) {
			seen = true
			st = waitStatus(c.t, nd, limit, fmt.Sprintf("%d nodes, a leader, the workspace shared", n), func(st cluster.Status) bool {
				if !st.Ready || st.Leader == "" || len(st.Nodes) != n {
					return false
				}
				for _, x := range st.Nodes {
					if x.WorkspaceRefused != "" {
						return false
					}
				}
				return true
			})
		}
	}
	if !seen {
		c.t.Fatal("no node alive")
	}
	return st
}

// alive reports whether nd's process runs (and is not stopped by a test).
func (c *e2eCluster) alive(nd *clusterNode) bool {
	return nd.p != nil && nd.p.cmd.ProcessState == nil
}

// node returns the node named name.
func (c *e2eCluster) node(name string) *clusterNode {
	for _, nd := range c.nodes {
		if nd.name == name {
			return nd
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

// kill9 kills nd with SIGKILL and reaps it: no lease is given up.
func (c *e2eCluster) kill9(nd *clusterNode) {
	c.t.Helper()
	_ = nd.p.cmd.Process.Kill()
	_ = nd.p.cmd.Wait()
}

// signal sends sig (SIGSTOP, SIGCONT) to nd's process.
func (c *e2eCluster) signal(nd *clusterNode, sig syscall.Signal) {
	c.t.Helper()
	if err := nd.p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// status is the cluster's status as a live node answers it.
func (c *e2eCluster) status(nd *clusterNode) (cluster.Status, bool) {
	return nd.statusJSON(c.t)
}

// logs are the last bytes of every node's stderr, for failure messages.
func (c *e2eCluster) logs() string {
	var b strings.Builder
	for _, nd := range c.nodes {
		if nd.p != nil {
			fmt.Fprintf(&b, "\n--- stderr of %s:\n%s", nd.name, tail(nd.p.errs.String(), 3000))
		}
	}
	return b.String()
}

// ---- the clients ----

// frame is one decoded server frame.
type frame map[string]any

func (f frame) typ() string { s, _ := f["type"].(string); return s }
func (f frame) str(k string) string {
	s, _ := f[k].(string)
	return s
}
func (f frame) seq() int { n, _ := f["seq"].(float64); return int(n) }

// chatID is the frame's chat: an id on events, an object on chat.created.
func (f frame) chatID() string {
	switch v := f["chat"].(type) {
	case string:
		return v
	case map[string]any:
		s, _ := v["id"].(string)
		return s
	}
	return ""
}

// obj is the object under k (message, recovery, call...).
func (f frame) obj(k string) frame {
	m, _ := f[k].(map[string]any)
	return frame(m)
}

// e2eSock is one WebSocket client of a node: it keeps every frame it
// receives; requests carry a req each and wait for their answer.
type e2eSock struct {
	t    testing.TB
	node string
	c    *websocket.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	frames  []frame
	changed chan struct{}
	waiting map[string]chan frame // by req
	nreq    int
	closed  bool
	err     error
}

// dialNode opens a socket to nd.
func dialNode(t testing.TB, nd *clusterNode) *e2eSock {
	t.Helper()
	return dialAddr(t, nd.name, nd.p.addr)
}

func dialAddr(t testing.TB, name, addr string) *e2eSock {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + e2eToken}}
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", h)
	if err != nil {
		t.Fatalf("dial %s: %v", name, err)
	}
	s := &e2eSock{t: t, node: name, c: c, changed: make(chan struct{}), waiting: map[string]chan frame{}}
	t.Cleanup(func() { c.Close() })
	go s.read()
	return s
}

func (s *e2eSock) read() {
	for {
		_, b, err := s.c.ReadMessage()
		s.mu.Lock()
		if err != nil {
			s.closed, s.err = true, err
			for _, ch := range s.waiting {
				close(ch)
			}
			s.waiting = map[string]chan frame{}
			close(s.changed)
			s.mu.Unlock()
			return
		}
		var f frame
		_ = json.Unmarshal(b, &f)
		if r := f.str("req"); r != "" {
			if ch, ok := s.waiting[r]; ok && f.typ() != "reply.delta" {
				delete(s.waiting, r)
				ch <- f
			}
		}
		s.frames = append(s.frames, f)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// close ends the socket.
func (s *e2eSock) close() { _ = s.c.Close() }

// send writes a frame without waiting for anything.
func (s *e2eSock) send(m map[string]any) {
	s.t.Helper()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.c.WriteJSON(m); err != nil {
		s.t.Fatalf("%s: write: %v", s.node, err)
	}
}

// call sends m with a fresh req and returns the first frame answering it
// (an error frame included), within limit.
func (s *e2eSock) call(m map[string]any, limit time.Duration) frame {
	s.t.Helper()
	f, err := s.try(m, limit)
	if err != nil {
		s.t.Fatalf("%s: %v", s.node, err)
	}
	return f
}

// try is call returning what went wrong rather than failing the test.
func (s *e2eSock) try(m map[string]any, limit time.Duration) (frame, error) {
	ch := make(chan frame, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("socket closed: %v", s.err)
	}
	s.nreq++
	req := fmt.Sprintf("r%d", s.nreq)
	s.waiting[req] = ch
	s.mu.Unlock()
	out := map[string]any{"req": req}
	for k, v := range m {
		out[k] = v
	}
	s.wmu.Lock()
	err := s.c.WriteJSON(out)
	s.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("socket closed waiting for the answer to %v", m["type"])
		}
		return f, nil
	case <-time.After(limit):
		s.mu.Lock()
		delete(s.waiting, req)
		s.mu.Unlock()
		return nil, fmt.Errorf("no answer to %v within %v", m, limit)
	}
}

// must is call that fails the test on an error frame.
func (s *e2eSock) must(m map[string]any) frame {
	s.t.Helper()
	f := s.call(m, e2eWait)
	if f.typ() == "error" {
		s.t.Fatalf("%s: %v answered %v", s.node, m, f)
	}
	return f
}

// wait waits (bounded) until cond holds of the frames received so far.
func (s *e2eSock) wait(what string, limit time.Duration, cond func([]frame) bool) {
	s.t.Helper()
	deadline := time.After(limit)
	for {
		s.mu.Lock()
		ok, ch, closed := cond(s.frames), s.changed, s.closed
		n := len(s.frames)
		s.mu.Unlock()
		if ok {
			return
		}
		if closed {
			s.t.Fatalf("%s: socket closed (%v) waiting for %s", s.node, s.err, what)
		}
		select {
		case <-ch:
		case <-deadline:
			s.t.Fatalf("%s: timed out (%v) waiting for %s; %d frames, last %v", s.node, limit, what, n, s.lastFrames(5))
		}
	}
}

func (s *e2eSock) lastFrames(k int) []frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]frame(nil), s.frames[max(0, len(s.frames)-k):]...)
}

// snapshot copies the frames received so far.
func (s *e2eSock) snapshot() []frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]frame(nil), s.frames...)
}

// create makes a chat through the socket and returns its id.
func (s *e2eSock) create(title string) string {
	s.t.Helper()
	f := s.must(map[string]any{"type": "chat.create", "title": title})
	if f.typ() != "chat.created" || f.chatID() == "" {
		s.t.Fatalf("%s: chat.create answered %v", s.node, f)
	}
	return f.chatID()
}

// ofChat are the frames of chat among fs.
func ofChat(fs []frame, chat string) []frame {
	var out []frame
	for _, f := range fs {
		if f.chatID() == chat {
			out = append(out, f)
		}
	}
	return out
}

// count counts the frames of chat of type typ among fs.
func count(fs []frame, chat, typ string) int {
	n := 0
	for _, f := range fs {
		if f.typ() == typ && f.chatID() == chat {
			n++
		}
	}
	return n
}

// record reads chat's whole record through a fresh socket to addr:
// chat.open since 0 replays every stored event, then chat.resumed.
func readRecord(t testing.TB, name, addr, chat string) []frame {
	t.Helper()
	var s *e2eSock
	// A store that does not answer yet (its servers electing after one
	// was stopped, paused or restarted) refuses the read with the clear
	// "too few nodes answer"; a client asks again, and so does this.
	for deadline := time.Now().Add(e2eWait); ; {
		s = dialAddr(t, name, addr)
		ans := s.call(map[string]any{"type": "chat.open", "chat": chat, "since": 0}, e2eWait)
		if ans.typ() != "error" {
			break
		}
		s.close()
		if !strings.Contains(ans.str("message"), "too few nodes answer") || time.Now().After(deadline) {
			t.Fatalf("%s: chat.open %s since 0: %v", name, chat, ans)
		}
		time.Sleep(250 * time.Millisecond) // a store electing: asked again, bounded
	}
	defer s.close()
	s.wait("chat.resumed of "+chat, e2eWait, func(fs []frame) bool {
		for _, f := range fs {
			if f.typ() == "chat.resumed" && f.chatID() == chat {
				return true
			}
		}
		return false
	})
	var out []frame
	for _, f := range s.snapshot() {
		if f.typ() == "chat.resumed" {
			break
		}
		if f.chatID() == chat && f.typ() != "reply.delta" && f.typ() != "quota.wait" && f.typ() != "tool.progress" && f["seq"] != nil {
			out = append(out, f)
		}
	}
	return out
}

// checkSeqs fails unless the events' seqs are 1, 2, 3… without gap or repeat.
func checkSeqs(t testing.TB, where string, evs []frame) {
	t.Helper()
	for i, e := range evs {
		if e.seq() != i+1 {
			t.Fatalf("%s: event %d (%s) has seq %d, want %d (a gap or a repeat); seqs %v", where, i, e.typ(), e.seq(), i+1, seqsOf(evs))
		}
	}
}

func seqsOf(evs []frame) []int {
	var out []int
	for _, e := range evs {
		out = append(out, e.seq())
	}
	return out
}

// shape is an event list as "seq:type" strings, to compare records.
func shape(evs []frame) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d:%s", e.seq(), e.typ()))
	}
	return out
}

// percentile is the p-th percentile (0–100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// jsonOf renders v for failure messages.
func jsonOf(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
