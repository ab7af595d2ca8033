// Package mcptest is a real MCP server, built on the same SDK as the
// client, for tests of Mirror's MCP tools over stdio (a test binary runs
// Main when re-executed) and streamable HTTP (Handler). It writes what it
// did to files in a folder, one line per event, so a test in another
// process (the gateway killed mid-call) can read what reached it.
//
// Tools: echo {text}, slow {} (reports progress, then waits to be
// cancelled), crash {} (the process exits), add_tool {} (adds "added" and
// so tells the client its list changed), secret {} (returns the variable
// MCPTEST_SECRET and writes it to stderr), big {n} (n characters); and one
// resource, mem://notes; and one prompt, greet {name}.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Files in the folder: one line per event.
const (
	CallsFile  = "calls"  // "echo", "slow", "cancelled slow", ...
	StartsFile = "starts" // "start PID", one line per start of a stdio server
)

// Modes of Main (its second argument).
const (
	ModeServe         = "serve"
	ModeFailAfterOnce = "fail-after-once" // every start after the first exits at once
	ModeSlowStart     = "slow-start"      // waits a minute before serving
)

// EnvMain is the variable that makes a test binary run Main: its value is
// "MODE DIR".
const EnvMain = "MCPTEST_MAIN"

var logMu sync.Mutex

// note appends one line to a file of dir.
func note(dir, file, line string) {
	if dir == "" {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

// Lines reads a file of dir as its lines.
func Lines(dir, file string) []string {
	logMu.Lock()
	defer logMu.Unlock()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// NewServer is the test server; dir receives its notes ("" keeps none).
// cancelled, when not nil, gets a value each time a slow call is cancelled.
func NewServer(dir string, cancelled chan<- struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	args := func(req *mcp.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Returns its text.", InputSchema: obj(`"text":{"type":"string","maxLength":1000}`, "text")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			note(dir, CallsFile, "echo")
			return text(fmt.Sprint(args(req)["text"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Works until cancelled.", InputSchema: obj(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			note(dir, CallsFile, "slow")
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "working", Progress: 1, Total: 2})
			}
			select {
			case <-ctx.Done():
				note(dir, CallsFile, "cancelled slow")
				if cancelled != nil {
					cancelled <- struct{}{}
				}
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return text("done"), nil
			}
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Ends the server process.", InputSchema: obj(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			note(dir, CallsFile, "crash")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "add_tool", Description: "Adds the tool added.", InputSchema: obj(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			note(dir, CallsFile, "add_tool")
			s.AddTool(&mcp.Tool{Name: "added", Description: "Added while running.", InputSchema: obj(``)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					note(dir, CallsFile, "added")
					return text("added works"), nil
				})
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "secret", Description: "Returns the secret it was given.", InputSchema: obj(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			note(dir, CallsFile, "secret")
			v := os.Getenv("MCPTEST_SECRET")
			if os.Getenv(EnvMain) != "" { // a child: its stderr is the gateway's log
				fmt.Fprintln(os.Stderr, "mcptest: my secret is", v)
			}
			return text("the secret is " + v), nil
		})
	s.AddTool(&mcp.Tool{Name: "big", Description: "Returns n characters.", InputSchema: obj(`"n":{"type":"integer","minimum":0,"maximum":1000000}`, "n")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n, _ := args(req)["n"].(float64)
			return text(strings.Repeat("x", int(n))), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["name"] + "."}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "mem://notes", Name: "notes", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			note(dir, CallsFile, "read "+req.Params.URI)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "the notes"}}}, nil
		})
	return s
}

// Handler serves NewServer over streamable HTTP. It refuses requests whose
// Authorization is not auth ("" accepts all).
func Handler(dir, auth string, cancelled chan<- struct{}) http.Handler {
	srv := NewServer(dir, cancelled)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth != "" && r.Header.Get("Authorization") != auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Main serves over stdin and stdout when EnvMain is set ("MODE DIR"), and
// exits; otherwise it returns. Call it first in a TestMain.
func Main() {
	v := os.Getenv(EnvMain)
	if v == "" {
		return
	}
	mode, dir, _ := strings.Cut(v, " ")
	note(dir, StartsFile, "start "+strconv.Itoa(os.Getpid()))
	switch mode {
	case ModeFailAfterOnce:
		if len(Lines(dir, StartsFile)) > 1 {
			fmt.Fprintln(os.Stderr, "mcptest: refusing to start again")
			os.Exit(1)
		}
	case ModeSlowStart:
		time.Sleep(time.Minute)
	}
	if err := NewServer(dir, nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}
