package mcp

import (
	"context"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompt is one prompt a server offers, which a person sends with
// /prompt SERVER NAME [ARG=VALUE...].
type Prompt struct {
	Server, Name, Description string
	Args                      []string // argument names; required ones end in "*"
}

// listPrompts reads the server's prompts, when it has any.
func (s *server) listPrompts(ctx context.Context, sess *sdk.ClientSession) error {
	var out []Prompt
	if ir := sess.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("listing prompts: %w", err)
			}
			pr := Prompt{Server: s.cfg.Name, Name: p.Name, Description: p.Description}
			for _, a := range p.Arguments {
				n := a.Name
				if a.Required {
					n += "*"
				}
				pr.Args = append(pr.Args, n)
			}
			out = append(out, pr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	s.mu.Lock()
	s.prompts = out
	s.mu.Unlock()
	return nil
}

// Prompts lists every running server's prompts, by server then name.
func (m *Manager) Prompts() []Prompt {
	var out []Prompt
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, s.prompts...)
		s.mu.Unlock()
	}
	return out
}

// GetPrompt is the text of a server's prompt with args: its messages'
// text, one after another (a message of another role is marked so).
func (m *Manager) GetPrompt(ctx context.Context, server, name string, args map[string]string) (string, error) {
	s := m.byName[server]
	if s == nil {
		return "", fmt.Errorf("no MCP server %s (servers: %s)", server, strings.Join(m.Servers(), ", "))
	}
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return "", fmt.Errorf("the MCP server %s is not running now (%s)", server, s.lastError())
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	res, err := sess.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("prompt %s of %s: %s", name, server, s.redact(err.Error()))
	}
	var b strings.Builder
	for _, msg := range res.Messages {
		if msg == nil {
			continue
		}
		text := render(&sdk.CallToolResult{Content: []sdk.Content{msg.Content}})
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		if msg.Role != "user" {
			fmt.Fprintf(&b, "(%s) ", msg.Role)
		}
		b.WriteString(text)
	}
	return s.redact(b.String()), nil
}

// PromptList is Prompts one line each ("srv greet name*: Greets someone."),
// for /prompt.
func (m *Manager) PromptList() []string {
	var out []string
	for _, p := range m.Prompts() {
		line := p.Server + " " + p.Name
		if len(p.Args) > 0 {
			line += " " + strings.Join(p.Args, " ")
		}
		if p.Description != "" {
			line += ": " + trim(p.Description, 200)
		}
		out = append(out, line)
	}
	return out
}

// PromptText is GetPrompt, for /prompt.
func (m *Manager) PromptText(ctx context.Context, server, name string, args map[string]string) (string, error) {
	return m.GetPrompt(ctx, server, name, args)
}
