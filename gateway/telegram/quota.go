package telegram

import (
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// waitLine is the short status a quota.wait adds under the reply being
// streamed: one line, the numbers rounded, no countdown (each edit costs
// a message of the chat's pacing). The browser shows the full status.
func waitLine(ev *chats.QuotaWait) string {
	secs := max(1, (time.Duration(ev.WaitMS)*time.Millisecond+time.Second/2)/time.Second)
	if ev.Quota <= 0 {
		return fmt.Sprintf("⏳ Waiting about %d s: the provider asked to retry later.", secs)
	}
	return fmt.Sprintf("⏳ Waiting about %d s for the provider's per-minute quota (%s of %s used).",
		secs, shortTokens(int64(ev.Usage)), shortTokens(ev.Quota))
}

// progressLine is the status a running tool call's progress shows.
func progressLine(ev *chats.ToolProgress) string {
	text := ev.Text
	if r := []rune(text); len(r) > 200 {
		text = string(r[:200]) + "…"
	}
	return fmt.Sprintf("⏳ %s: %s", ev.Call.Name, text)
}

// shortTokens spells a token count as 950, 38k or 1.2M.
func shortTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1000)) + "k"
	default:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e6)) + "M"
	}
}

func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}
