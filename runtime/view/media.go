package view

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// ImageHandle is the handle an image pointer cites (ids.Image):
// tool_output with it gives the image back.
func ImageHandle(p provider.Part) string { return ids.Image(p.SHA256) }

// hasImages reports whether parts hold an image sent as its bytes.
func hasImages(parts []provider.Part) bool {
	for _, p := range parts {
		if maskable(p) {
			return true
		}
	}
	return false
}

// maskable says a part is an image a checkpoint may show as a pointer: it
// goes as its bytes and has a blob to get it back from.
func maskable(p provider.Part) bool {
	_, inPlace := p.InPlace()
	return p.Kind == provider.PartImage && !inPlace && p.SHA256 != ""
}

// imagePass masks the images of user rows before the tail, oldest first,
// until size is within target, and records the rows in cp. Pinned rows
// stay whole. It runs after tool results are masked: an old screenshot
// costs as much as a long tool output and is as seldom looked at again.
func (b *build) imagePass(cp *Checkpoint, work []entry, tail int, size *int, target int) int {
	n := 0
	for i := 0; i < tail && *size > target; i++ {
		e := &work[i]
		if e.row == nil || e.row.Kind != KindUser || e.row.Pinned || !hasImages(e.parts) {
			continue
		}
		m := b.maskImages(*e)
		if m.tokens >= e.tokens {
			continue
		}
		*size -= e.tokens - m.tokens
		cp.MaskedImages = append(cp.MaskedImages, e.row.Seq)
		*e = m
		n++
	}
	return n
}

// maskImages shows a user row's images as pointers: one line each, before
// its text, naming the image and the handle tool_output gives it back by.
// The other parts (a PDF, a transcript) stay. The same row always gives
// the same text, so a masked view is as byte-stable as any other.
func (b *build) maskImages(e entry) entry {
	var lines []string
	kept := make([]provider.Part, 0, len(e.parts))
	saved := 0
	for _, p := range e.parts {
		if !maskable(p) {
			kept = append(kept, p)
			continue
		}
		saved += provider.PartTokens(b.in.Provider, p)
		line := fmt.Sprintf("[Image %s (%s", partLabel(p), p.MediaType)
		if p.Width > 0 && p.Height > 0 {
			line += fmt.Sprintf(", %d×%d pixels", p.Width, p.Height)
		}
		line += fmt.Sprintf(") of %s cleared from this view at a checkpoint.", e.row.MessageID())
		if b.tools[ToolOutput] {
			line += fmt.Sprintf(` Get it back with %s {"tool_call_id": %q}.`, ToolOutput, ImageHandle(p))
		}
		lines = append(lines, line+"]")
	}
	ptr := strings.Join(lines, "\n")
	text := ptr
	if e.text != "" {
		text += "\n\n" + e.text
	}
	e.tokens = e.tokens - saved - b.count(e.text) + b.count(text)
	e.text, e.parts, e.masked = text, kept, true
	if len(kept) == 0 {
		e.parts = nil
	}
	return e
}

func partLabel(p provider.Part) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Kind
}

// RecoveredMessage is the user message that carries, right after a step's
// tool results, the attachments those results brought back (tool_output
// of an image handle): a tool message is text on every provider, and a
// user message after the results is valid on all of them. Its tokens are
// the parts' by the rule of the provider kind.
func RecoveredMessage(kind string, parts []provider.Part) provider.Message {
	return provider.Message{Role: provider.RoleUser, Parts: parts, Tokens: provider.PartsTokens(kind, parts)}
}

// withRecovered is msgs as view builds them, with a RecoveredMessage after
// each run of tool messages whose entries carry parts; the tool messages
// themselves go without them.
func withRecovered(kind string, msgs []provider.Message, reasoning []string) ([]provider.Message, []string) {
	has := false
	for i := range msgs {
		if msgs[i].Role == provider.RoleTool && len(msgs[i].Parts) > 0 {
			has = true
			break
		}
	}
	if !has {
		return msgs, reasoning
	}
	out := make([]provider.Message, 0, len(msgs)+1)
	outR := make([]string, 0, len(msgs)+1)
	var pending []provider.Part
	flush := func() {
		if len(pending) > 0 {
			out = append(out, RecoveredMessage(kind, pending))
			outR = append(outR, "")
			pending = nil
		}
	}
	for i, m := range msgs {
		if m.Role != provider.RoleTool {
			flush()
		} else if len(m.Parts) > 0 {
			pending = append(pending, m.Parts...)
			m.Tokens -= provider.PartsTokens(kind, m.Parts)
			m.Parts = nil
		}
		out = append(out, m)
		outR = append(outR, reasoning[i])
	}
	flush()
	return out, outR
}

func seqSet(seqs []uint64) map[uint64]bool {
	m := make(map[uint64]bool, len(seqs))
	for _, s := range seqs {
		m[s] = true
	}
	return m
}

// seqsAfter keeps the seqs after evicted, in order.
func seqsAfter(seqs []uint64, evicted uint64) []uint64 {
	out := seqs[:0:0]
	for _, s := range seqs {
		if s > evicted {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
