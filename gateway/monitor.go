package gateway

// The monitor side of the gateway: the breaker API, the dashboard at
// /monitor with its live feed, and /metrics.
//
//	GET  /monitor                      the dashboard (auth like /: the login page with 401 without it)
//	GET  /api/breakers                 monitor.Snapshot as JSON
//	POST /api/breakers/{id}/reset      closes an open breaker by hand; ids hold "/", so
//	                                   both /api/breakers/provider%3Aopenai%2Fgpt-4o/reset
//	                                   and /api/breakers/provider:openai/gpt-4o/reset work
//	GET  /api/monitor/events           Server-Sent Events, see monitorEvents
//	GET  /api/monitor/aggregates       monitor.Aggregates as JSON; ?span=day (default) | week
//	GET  /metrics                      Prometheus text format (Bearer token like the API)
//	GET  /api/mcp                      {"servers":[{name, transport, state, tools, restarts, error, breaker}]}
//
// Without Options.Monitor (or Options.Metrics for /metrics) these answer 503
// with a JSON error.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/gateway/web"
	"github.com/mirror-gateway/mirror/monitor"
)

const (
	// chatsEvery is how often the live feed sends the chat list.
	chatsEvery = 2 * time.Second
	// feedWriteTimeout bounds one write to a feed client, so a client that
	// stopped reading cannot hold a handler (and Close) for long.
	feedWriteTimeout = 10 * time.Second
	// feedBuffer is how many breaker changes wait for a slow feed client
	// before it is sent a fresh snapshot instead.
	feedBuffer = 64
)

// monitorSide is the gateway's state for the monitor routes.
type monitorSide struct {
	metrics http.Handler // nil without Options.Metrics

	mu      sync.Mutex
	closed  bool
	done    chan struct{} // closed by Server.Close
	wg      sync.WaitGroup
	streams int
	// shutdown holds, per http.Server serving this gateway, a channel closed
	// when that server's Shutdown starts: Shutdown waits for handlers to
	// return but never cancels their contexts, so without it an open
	// dashboard would hold a graceful shutdown until its deadline.
	shutdown map[*http.Server]chan struct{}
}

// monitorRoutes registers the monitor routes; New calls it.
func (s *Server) monitorRoutes() {
	s.mon = &monitorSide{done: make(chan struct{}), shutdown: map[*http.Server]chan struct{}{}}
	if s.opt.Metrics != nil {
		s.mon.metrics = s.opt.Metrics.Handler(s.opt.Monitor)
	}
	s.mux.HandleFunc("GET /monitor", s.monitorPage)
	s.mux.Handle("GET /api/breakers", s.need(http.HandlerFunc(s.apiBreakers)))
	// {rest...} rather than {id}/reset: a pattern wildcard cannot be
	// followed by more segments when it spans several, and ids hold "/".
	s.mux.Handle("POST /api/breakers/{rest...}", s.need(s.ownerOnly(http.HandlerFunc(s.apiBreakerReset))))
	s.mux.Handle("GET /api/monitor/events", s.need(http.HandlerFunc(s.monitorEvents)))
	s.mux.Handle("GET /api/monitor/aggregates", s.need(http.HandlerFunc(s.apiAggregates)))
	s.mux.Handle("GET /metrics", s.need(http.HandlerFunc(s.serveMetrics)))
	s.mux.Handle("GET /api/quotas", s.need(http.HandlerFunc(s.apiQuotas)))
	s.mux.Handle("GET /api/mcp", s.need(http.HandlerFunc(s.apiMCP)))
}

// closeMonitorFeeds ends every live feed and waits for their handlers;
// Server.Close calls it. Feeds asked for afterwards get 503.
func (s *Server) closeMonitorFeeds() {
	s.mon.mu.Lock()
	if !s.mon.closed {
		s.mon.closed = true
		close(s.mon.done)
	}
	s.mon.mu.Unlock()
	s.mon.wg.Wait()
}

// monitorStreams returns how many live feeds are open.
func (s *Server) monitorStreams() int {
	s.mon.mu.Lock()
	defer s.mon.mu.Unlock()
	return s.mon.streams
}

// enter counts a feed in; it fails once the gateway is closed. The returned
// channel is closed when the http.Server serving r starts shutting down.
func (ms *monitorSide) enter(r *http.Request) (shutdown <-chan struct{}, ok bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return nil, false
	}
	ms.wg.Add(1)
	ms.streams++
	if hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server); hs != nil {
		ch, seen := ms.shutdown[hs]
		if !seen {
			ch = make(chan struct{})
			ms.shutdown[hs] = ch
			var once sync.Once
			// Shutdown runs these on every call; close once.
			hs.RegisterOnShutdown(func() { once.Do(func() { close(ch) }) })
		}
		shutdown = ch
	}
	return shutdown, true
}

func (ms *monitorSide) leave() {
	ms.mu.Lock()
	ms.streams--
	ms.mu.Unlock()
	ms.wg.Done()
}

func monitorOff(w http.ResponseWriter) {
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the breaker monitor is not running in this gateway"})
}

func (s *Server) monitorPage(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(web.LoginPage())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WritePage(w, r, "monitor.html")
}

func (s *Server) apiBreakers(w http.ResponseWriter, r *http.Request) {
	mon := s.opt.Monitor
	if mon == nil {
		monitorOff(w)
		return
	}
	snap, err := mon.Snapshot()
	if err != nil {
		s.log.Error("breaker snapshot", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the breaker history"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, snap)
}

// apiBreakerReset serves POST /api/breakers/{id}/reset. It answers
// {"id": ID, "reset": true} when it closed the breaker and "reset": false
// when the breaker was closed already; 404 for an unknown id.
func (s *Server) apiBreakerReset(w http.ResponseWriter, r *http.Request) {
	// The mux unescapes each segment, so an id sent percent-encoded
	// (provider%3Aopenai%2Fgpt-4o) and one sent with its slash as is come
	// out the same.
	id, ok := strings.CutSuffix(r.PathValue("rest"), "/reset")
	if !ok || id == "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: POST /api/breakers/{id}/reset"})
		return
	}
	mon := s.opt.Monitor
	if mon == nil {
		monitorOff(w)
		return
	}
	// A cookie-authenticated reset from another origin never gets here:
	// the handler's forged-request check refuses it for every route.
	reset, err := mon.Reset(id)
	switch {
	case errors.Is(err, monitor.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no breaker %q", id)})
		return
	case err != nil:
		s.log.Error("reset breaker", "breaker", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not reset the breaker"})
		return
	}
	if reset {
		s.log.Info("breaker reset by hand", "breaker", id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "reset": reset})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.mon.metrics == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "metrics are not enabled in this gateway"})
		return
	}
	s.mon.metrics.ServeHTTP(w, r)
}

// monitorEvents serves the dashboard's live feed as Server-Sent Events:
//
//	event: snapshot  data: monitor.Snapshot   on connect, and again when the
//	                                          client fell too far behind
//	event: breaker   data: BREAKER            after each breaker transition
//	event: chats     data: {"chats":[...]}    on connect and every 2 s (as GET /api/chats)
//
// It subscribes before taking the snapshot, so no transition falls between
// the two (one may come twice; applying a BREAKER is idempotent). It ends
// when the client goes away, when Server.Close runs or when the serving
// http.Server shuts down; the subscription ends with it.
func (s *Server) monitorEvents(w http.ResponseWriter, r *http.Request) {
	mon := s.opt.Monitor
	if mon == nil {
		monitorOff(w)
		return
	}
	shutdown, ok := s.mon.enter(r)
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "shutting down"})
		return
	}
	defer s.mon.leave()

	events := make(chan monitor.BreakerView, feedBuffer)
	behind := make(chan struct{}, 1)
	cancel := mon.Subscribe(func(v monitor.BreakerView) {
		// Never block the monitor's delivery for one slow client.
		select {
		case events <- v:
		default:
			select {
			case behind <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()

	rc := http.NewResponseController(w)
	// Deadlines set here outlive the handler on a kept-alive connection.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	write := func(event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		// Per write, which also lifts a server-wide WriteTimeout that would
		// otherwise cut every stream.
		_ = rc.SetWriteDeadline(time.Now().Add(feedWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	snapshot := func() error {
		snap, err := mon.Snapshot()
		if err != nil {
			s.log.Error("breaker snapshot", "err", err)
			return nil // the breaker events still flow
		}
		return write("snapshot", snap)
	}
	sendChats := func() error {
		if s.opt.Chats == nil {
			return write("chats", map[string]any{"chats": []chats.Chat{}})
		}
		// The most recent chats and every chat with work left, from the
		// indexes: what the dashboard shows, never a scan of every chat.
		page, err := s.scope(r).ListPage(r.Context(), "", chats.MaxListPage)
		var busy []chats.Chat
		if err == nil {
			busy, err = s.scope(r).Working(r.Context())
		}
		if err != nil {
			s.log.Error("list chats", "err", err)
			return nil
		}
		list := append([]chats.Chat{}, page.Chats...)
		seen := make(map[string]bool, len(list))
		for _, c := range list {
			seen[c.ID] = true
		}
		for _, c := range busy {
			if !seen[c.ID] {
				list = append(list, c)
			}
		}
		return write("chats", map[string]any{"chats": list})
	}

	_ = rc.SetWriteDeadline(time.Now().Add(feedWriteTimeout))
	if _, err := fmt.Fprint(w, "retry: 3000\n\n"); err != nil {
		return
	}
	if snapshot() != nil || sendChats() != nil {
		return
	}
	tick := time.NewTicker(chatsEvery)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.mon.done:
			return
		case <-shutdown:
			return
		case v := <-events:
			err = write("breaker", v)
		case <-behind:
			for len(events) > 0 {
				<-events
			}
			err = snapshot()
		case <-tick.C:
			err = sendChats()
		}
		if err != nil {
			return
		}
	}
}

// apiQuotas answers GET /api/quotas: the last quota each provider, model and
// key reported, the local usage of its window and its waits.
func (s *Server) apiQuotas(w http.ResponseWriter, r *http.Request) {
	if s.opt.Quotas == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "quota accounting is not running in this gateway"})
		return
	}
	q := s.opt.Quotas()
	if q == nil {
		q = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"quotas": q})
}

// apiAggregates serves the Monitor's charts: the stored aggregates of one
// span (day or week), which survive a restart.
func (s *Server) apiAggregates(w http.ResponseWriter, r *http.Request) {
	mon := s.opt.Monitor
	if mon == nil {
		monitorOff(w)
		return
	}
	span := monitor.Span(r.URL.Query().Get("span"))
	if span == "" {
		span = monitor.SpanDay
	}
	a, err := mon.Aggregates(span)
	if errors.Is(err, monitor.ErrSpan) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		s.log.Error("monitor aggregates", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the aggregates"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, a)
}

// apiMCP lists the MCP servers for the Monitor: state, tool counts,
// restarts, the last error (secrets redacted) and the breaker's id.
func (s *Server) apiMCP(w http.ResponseWriter, r *http.Request) {
	if s.opt.MCP == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no MCP servers run in this gateway"})
		return
	}
	v := s.opt.MCP()
	if v == nil {
		v = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": v})
}
