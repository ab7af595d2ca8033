package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// readResourceTool is the tool (SERVER__read_resource) that reads a
// server's resources, offered when the server has resources and no tool
// of that name of its own.
const readResourceTool = "read_resource"

// maxListedResources bounds the resources named in the tool's description:
// the description is sent with every request.
const maxListedResources = 20

// resourceTool is SERVER__read_resource for a server that has resources,
// its description naming the first of them; nil for one that has none.
func (s *server) resourceTool(ctx context.Context, sess *sdk.ClientSession, own []*sdk.Tool) (*tools.External, error) {
	ir := sess.InitializeResult()
	if ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil {
		return nil, nil
	}
	for _, t := range own {
		if t.Name == readResourceTool {
			return nil, nil // the server's own tool of that name wins
		}
	}
	var names []string
	more := 0
	for r, err := range sess.Resources(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing resources: %w", err)
		}
		if len(names) == maxListedResources {
			more++
			continue
		}
		line := r.URI
		if r.Name != "" && r.Name != r.URI {
			line += " (" + trim(r.Name, 80) + ")"
		}
		names = append(names, line)
	}
	desc := fmt.Sprintf("Reads a resource of the MCP server %s by its URI.", s.cfg.Name)
	if len(names) > 0 {
		desc += " Resources: " + strings.Join(names, ", ")
		if more > 0 {
			desc += fmt.Sprintf(", and %d more", more)
		}
		desc += "."
	}
	params := []byte(`{"type":"object","properties":{"uri":{"type":"string","minLength":1,"maxLength":2048,"description":"the resource's URI"}},"required":["uri"],"additionalProperties":false}`)
	return &tools.External{Name: s.cfg.Name + config.MCPSeparator + readResourceTool, Description: desc, Parameters: params,
		Server: s.cfg.Name, Check: checker(params)}, nil
}

// readsResources reports whether tool is this server's read_resource.
func (s *server) readsResources(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resources && tool == readResourceTool
}

// readResource reads the resource args names, as a tool result: text
// contents as they are, binary ones as a line saying what they are.
func readResource(ctx context.Context, sess *sdk.ClientSession, args []byte) (*sdk.CallToolResult, error) {
	var a struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.URI == "" {
		// Checked against the schema already; a tool error all the same,
		// never a failure of the server.
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: `want {"uri": "..."}`}}}, nil
	}
	rr, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: a.URI})
	if err != nil {
		return nil, err
	}
	out := &sdk.CallToolResult{}
	for _, c := range rr.Contents {
		if c == nil {
			continue
		}
		out.Content = append(out.Content, &sdk.EmbeddedResource{Resource: c})
	}
	return out, nil
}
