package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// server is one configured MCP server and its supervisor's state.
type server struct {
	cfg     config.MCPServer
	m       *Manager
	opt     Options
	env     []string          // NAME=value given to a stdio child
	headers map[string]string // header values of an HTTP server
	secrets []string          // values never logged or returned
	breaker *monitor.Breaker  // nil without a Monitor
	changed chan struct{}     // its tool list changed

	mu        sync.Mutex
	sess      *sdk.ClientSession // nil while not running
	tools     []tools.External
	state     string
	lastErr   string
	restarts  int
	resources bool                    // SERVER__read_resource is offered: the server has resources
	prompts   []Prompt                // the prompts /prompt sends
	progress  map[string]func(string) // progress token -> the call's reporter
	nextTok   uint64
}

func (s *server) addSecret(v string) {
	if len(v) >= 4 { // shorter values would redact ordinary words
		s.secrets = append(s.secrets, v)
	}
}

// redact replaces every secret value in text.
func (s *server) redact(text string) string {
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, "[redacted]")
	}
	return text
}

func (s *server) set(state, errText string) {
	s.mu.Lock()
	s.state = state
	if errText != "" {
		s.lastErr = s.redact(errText)
	}
	s.mu.Unlock()
}

// run supervises the server until ctx is done: start, list, serve until it
// ends, then back off and start again, asking its breaker each time.
func (s *server) run(ctx context.Context) {
	backoff := s.opt.MinBackoff
	defer s.set(StateStopped, "")
	for ctx.Err() == nil {
		var done func(error, string)
		if s.breaker != nil {
			d, err := s.breaker.Allow()
			if err != nil {
				s.set(StateUnavailable, "")
				wait := backoff
				var oe *monitor.OpenError
				if errors.As(err, &oe) && oe.State == monitor.StateOpen {
					wait = max(time.Until(oe.RetryAt), s.opt.MinBackoff)
				}
				if !sleep(ctx, wait) {
					return
				}
				continue
			}
			done = d
		}
		report := func(err error, class string) {
			if done != nil {
				done(err, class)
				done = nil
			}
		}
		s.set(StateStarting, "")
		started := time.Now()
		err := s.serve(ctx, func() { report(nil, "") })
		if ctx.Err() != nil {
			report(ctx.Err(), monitor.ClassCanceled) // shutting down says nothing of the server
			return
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		s.set(StateRestarting, err.Error())
		s.m.log.Warn("mcp: server ended; restarting", "server", s.cfg.Name, "error", s.redact(err.Error()), "backoff", backoff)
		report(err, monitor.ClassServer)
		if time.Since(started) >= s.opt.Stable {
			backoff = s.opt.MinBackoff
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, s.opt.MaxBackoff)
	}
}

// serve starts the server once, lists its tools and serves until it ends
// or ctx is done; stable is called once it has been up for Options.Stable.
// It returns why it ended.
func (s *server) serve(ctx context.Context, stable func()) error {
	client := sdk.NewClient(&sdk.Implementation{Name: "mirror", Version: "1"}, &sdk.ClientOptions{
		Capabilities:               &sdk.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *sdk.ToolListChangedRequest) { s.listChanged() },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { s.listChanged() },
		PromptListChangedHandler:   func(context.Context, *sdk.PromptListChangedRequest) { s.listChanged() },
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			s.onProgress(req.Params)
		},
	})
	transport, stop, err := s.transport()
	if err != nil {
		return err
	}
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	sess, err := client.Connect(cctx, transport, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer sess.Close()
	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	if err := s.list(ctx, sess); err != nil {
		return err
	}
	s.mu.Lock()
	s.sess = sess
	s.state = StateReady
	s.mu.Unlock()
	s.m.log.Info("mcp: server ready", "server", s.cfg.Name, "tools", len(s.tools))
	defer func() {
		s.mu.Lock()
		s.sess = nil
		s.mu.Unlock()
	}()
	timer := time.NewTimer(s.opt.Stable)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return fmt.Errorf("ended: %w", err)
		case <-timer.C:
			stable()
		case <-s.changed:
			if err := s.list(ctx, sess); err != nil {
				return err
			}
		}
	}
}

// list reads the server's tools and publishes them.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	var all []*sdk.Tool
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		all = append(all, t)
	}
	ext := s.externals(all)
	res, err := s.resourceTool(lctx, sess, all)
	if err != nil {
		return err
	}
	if err := s.listPrompts(lctx, sess); err != nil {
		return err
	}
	if res != nil {
		ext = append(ext, *res)
		sort.Slice(ext, func(i, j int) bool { return ext[i].Name < ext[j].Name })
	}
	s.mu.Lock()
	s.tools = ext
	s.resources = res != nil
	s.mu.Unlock()
	s.m.gen.Add(1)
	return nil
}

// transport makes the connection of one start: a child process under a
// pgroup leader for a command, streamable HTTP for a url. stop ends what
// it started.
func (s *server) transport() (sdk.Transport, func(), error) {
	if !s.cfg.Stdio() {
		// A transport of its own per start, so stopping leaves no idle
		// connection (and its goroutines) behind.
		base := http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Transport: headerTransport{base: base, headers: s.headers}}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: 1}, base.CloseIdleConnections, nil
	}
	cmd := pgroup.Command(shellLine(s.cfg.Command, s.cfg.Args))
	cmd.KillStragglers = true
	cmd.Dir = s.cfg.Cwd
	cmd.Env = append(baseEnv(), s.env...)
	cmd.Stderr = &lineLog{s: s}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	stop := func() {
		// The session closed stdin already; a server that does not end on
		// EOF is killed with everything it started.
		cmd.Kill()
		_ = cmd.Wait()
	}
	return &sdk.IOTransport{Reader: stdout, Writer: stdin}, stop, nil
}

// call runs one tool call on the running session. A stdio server's
// breaker is the supervisor's (a crash is what fails); an HTTP server has
// no process to watch, so its calls are what tell its breaker: each asks
// it first, and after the cooldown the first call is the probe.
func (s *server) call(ctx context.Context, tool string, args []byte, meta tools.CallMeta) (string, bool, error) {
	done := func(error, string) {}
	if s.breaker != nil {
		if s.cfg.Stdio() {
			if s.breaker.View().State == monitor.StateOpen {
				return "", true, s.unavailable()
			}
		} else {
			d, err := s.breaker.Allow()
			if err != nil {
				return "", true, s.unavailable()
			}
			done = d
		}
	}
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		err := fmt.Errorf("unavailable: the MCP server %s is not running now (%s); it is being restarted, so try again later or do the task without it", s.cfg.Name, s.lastError())
		done(err, monitor.ClassCanceled) // an error of an ignored class: neither failure nor success
		return "", true, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	params := &sdk.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
	if meta.Progress != nil {
		tok := s.watch(meta.Progress)
		defer s.unwatch(tok)
		params.SetProgressToken(tok)
	}
	var res *sdk.CallToolResult
	var err error
	if s.readsResources(tool) {
		res, err = readResource(ctx, sess, args)
	} else {
		res, err = sess.CallTool(ctx, params)
	}
	switch {
	case err == nil:
		done(nil, "")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		done(err, monitor.ClassTimeout)
		return "", true, fmt.Errorf("no answer within %s (mcp.servers timeout); the call was cancelled on the server", s.cfg.CallTimeout())
	case ctx.Err() != nil:
		done(ctx.Err(), monitor.ClassCanceled) // the person stopped it: says nothing of the server
		return "", true, errors.New("stopped: the call was cancelled on the server")
	default:
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code != codeRejected {
			// The server answered with an error: it is up.
			done(nil, "")
			return "", true, err
		}
		done(err, monitor.ClassNetwork)
		s.mu.Lock()
		s.lastErr = s.redact(err.Error())
		s.mu.Unlock()
		if !s.cfg.Stdio() {
			// The session may be gone with the server (a restarted one
			// forgets it): end it, so the supervisor connects again.
			go sess.Close()
		}
		return "", true, err
	}
	return render(res), res.IsError, nil
}

// codeRejected is the SDK's JSON-RPC code for a request its transport
// could not deliver (the HTTP POST failed): no answer from the server.
const codeRejected = -32005

// unavailable is what a call of an open server's tool answers.
func (s *server) unavailable() error {
	v := s.breaker.View()
	until := ""
	if v.RetryAt != nil {
		until = " until " + v.RetryAt.Format(time.RFC3339)
	}
	return fmt.Errorf("unavailable: the MCP server %s keeps failing (%s) and is switched off%s; do the task without it or tell the person", s.cfg.Name, s.lastError(), until)
}

func (s *server) lastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == "" {
		return "no error yet"
	}
	return s.lastErr
}

func (s *server) watch(fn func(string)) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextTok++
	tok := "mirror-" + strconv.FormatUint(s.nextTok, 10)
	s.progress[tok] = fn
	return tok
}

func (s *server) unwatch(tok string) {
	s.mu.Lock()
	delete(s.progress, tok)
	s.mu.Unlock()
}

func (s *server) onProgress(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	tok, _ := p.ProgressToken.(string)
	s.mu.Lock()
	fn := s.progress[tok]
	s.mu.Unlock()
	if fn == nil {
		return
	}
	msg := p.Message
	switch {
	case p.Total > 0:
		msg = strings.TrimSpace(fmt.Sprintf("%s %g/%g", msg, p.Progress, p.Total))
	case msg == "":
		msg = fmt.Sprintf("%g", p.Progress)
	}
	fn(s.redact(msg))
}

// render is what the model reads of a result: its text, and a line for
// each part that is not text.
func render(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource %s]", c.URI)
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob))
			}
		default:
			j, _ := json.Marshal(c)
			b.Write(j)
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		b.Write(j)
	}
	return b.String()
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// lineLog writes a child's stderr to the log a line at a time, secrets
// redacted, long lines cut.
type lineLog struct {
	s   *server
	mu  sync.Mutex
	buf []byte
}

const maxLogLine = 2000

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLog) emit(line []byte) {
	text := l.s.redact(strings.ToValidUTF8(strings.TrimRight(string(line), "\r"), "\uFFFD"))
	if text == "" {
		return
	}
	l.s.m.log.Info("mcp: server stderr", "server", l.s.cfg.Name, "line", trim(text, maxLogLine))
}

// shellLine is `exec COMMAND ARGS...` for /bin/sh -c with every word
// quoted, so nothing in the configuration is read by the shell.
func shellLine(command string, args []string) string {
	words := append([]string{command}, args...)
	for i, w := range words {
		words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return "exec " + strings.Join(words, " ")
}

// baseEnv is what every stdio server gets of Mirror's environment.
func baseEnv() []string {
	env := []string{"PATH=" + envOr("PATH", "/usr/local/bin:/usr/bin:/bin")}
	if h := os.Getenv("HOME"); h != "" {
		env = append(env, "HOME="+h)
	}
	return append(env, "LANG="+envOr("LANG", "C.UTF-8"))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" && !strings.ContainsAny(v, "\n") {
		return v
	}
	return def
}

// sleep waits d or until ctx is done; false when ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

var _ io.Writer = (*lineLog)(nil)

// listChanged asks the supervisor to list the server's tools (and
// resources) again; it never blocks the session.
func (s *server) listChanged() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
