package chats

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime"
)

// toolSizer is a Turner that says how much of the window the tool
// definitions take (the runtime's Engine); chats built on another Turner
// leave that line out of /status.
type toolSizer interface {
	Tools(chain string, servers []string) runtime.ToolsInfo
}

// servers is what a turn of the chat offers of the MCP servers: nil for
// every configured one, else the chosen (possibly none).
func (a *actor) servers() []string {
	if a.meta.MCPServers == nil {
		return nil
	}
	return append([]string{}, *a.meta.MCPServers...)
}

// toolsLine is /status's line on the tool definitions, "" without one.
func (a *actor) toolsLine() string {
	ts, ok := a.s.opt.Turner.(toolSizer)
	if !ok {
		return ""
	}
	return ts.Tools(a.meta.Chain, a.servers()).Line()
}

// mcpCommand is /mcp: which MCP servers this chat offers the model.
//
//	/mcp                  the servers, offered or not, and the tools line
//	/mcp all | none       offer every server, or none
//	/mcp on|off NAME...   offer or leave out servers
func (s *Service) mcpCommand(ctx context.Context, chat string, fields []string, o Origin) (string, error) {
	known := s.opt.MCPServers
	usage := fmt.Errorf("%w: usage: /mcp [all | none | on NAME... | off NAME...]; servers: %s", ErrBadInput, orNone(known))
	return doValue(ctx, s, chat, func(a *actor) (string, error) {
		if len(fields) > 1 {
			if err := a.usable(); err != nil {
				return "", err
			}
			cur := a.servers()
			if cur == nil {
				cur = append([]string{}, known...)
			}
			var next []string
			switch fields[1] {
			case "all":
				if len(fields) != 2 {
					return "", usage
				}
				next = nil
			case "none":
				if len(fields) != 2 {
					return "", usage
				}
				next = []string{}
			case "on", "off":
				if len(fields) < 3 {
					return "", usage
				}
				for _, n := range fields[2:] {
					if !slices.Contains(known, n) {
						return "", fmt.Errorf("%w: no MCP server %q in runtime.yaml; servers: %s", ErrBadInput, n, orNone(known))
					}
				}
				for _, n := range known {
					on := slices.Contains(cur, n)
					if slices.Contains(fields[2:], n) {
						on = fields[1] == "on"
					}
					if on {
						next = append(next, n)
					}
				}
				if next == nil {
					next = []string{}
				}
				if len(next) == len(known) {
					next = nil // every server: new ones configured later are offered too
				}
			default:
				return "", usage
			}
			if next == nil {
				a.meta.MCPServers = nil
			} else {
				a.meta.MCPServers = &next
			}
			a.b.dirty = true
			if err := a.flush(); err != nil {
				return "", err
			}
		}
		return a.describeServers(known), nil
	})
}

func (a *actor) describeServers(known []string) string {
	if len(known) == 0 {
		return "No MCP servers are configured (mcp.servers in runtime.yaml)."
	}
	cur := a.servers()
	var on, off []string
	for _, n := range known {
		if cur == nil || slices.Contains(cur, n) {
			on = append(on, n)
		} else {
			off = append(off, n)
		}
	}
	line := "MCP servers offered in this chat: " + orNone(on)
	if len(off) > 0 {
		line += "; left out: " + strings.Join(off, ", ")
	}
	line += "."
	if tl := a.toolsLine(); tl != "" {
		line += "\n" + tl
	}
	return line
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Prompts are the prompts of the MCP servers (runtime/tools/mcp's
// Manager), which /prompt sends as the person's message.
type Prompts interface {
	// PromptList lists them, one line each.
	PromptList() []string
	// PromptText is the text of a server's prompt with args.
	PromptText(ctx context.Context, server, name string, args map[string]string) (string, error)
}

// promptCommand is /prompt: without arguments the servers' prompts; with
// SERVER NAME [ARG=VALUE...] that prompt's text sent as the person's next
// message, queued like any other.
func (s *Service) promptCommand(ctx context.Context, chat string, fields []string, o Origin) (string, error) {
	p := s.opt.Prompts
	if p == nil {
		return "No MCP server offers prompts here.", nil
	}
	if len(fields) == 1 {
		list := p.PromptList()
		if len(list) == 0 {
			return "No MCP server offers prompts now.", nil
		}
		return "Prompts (send one with /prompt SERVER NAME [ARG=VALUE...]; * marks a required argument):\n" + strings.Join(list, "\n"), nil
	}
	if len(fields) < 3 {
		return "", fmt.Errorf("%w: usage: /prompt SERVER NAME [ARG=VALUE...]", ErrBadInput)
	}
	args := map[string]string{}
	for _, f := range fields[3:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return "", fmt.Errorf("%w: prompt arguments are ARG=VALUE, not %q", ErrBadInput, f)
		}
		args[k] = v
	}
	text, err := p.PromptText(ctx, fields[1], fields[2], args)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%w: the prompt %s of %s is empty", ErrBadInput, fields[2], fields[1])
	}
	m, err := s.Send(ctx, chat, text, "prompt-"+randomID(), "", o)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Sent the prompt %s of %s as message %s (%d characters).", fields[2], fields[1], m.ID, utf8.RuneCountInString(text)), nil
}
