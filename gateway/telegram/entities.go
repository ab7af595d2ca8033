package telegram

import (
	"cmp"
	"slices"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// entityText is a message's text with its entities made safe to slice by.
// The Bot API counts entity offsets and lengths in UTF-16 code units, and
// they come from the sender's client: out of order, overlapping, past the
// end of the text, negative, or cutting a surrogate pair. Every part of
// this package that reads text by entity goes through parseEntities, so
// no entity can make a slice out of range.
type entityText struct {
	units []uint16
	// spans are the entities, clamped to the text and to whole code
	// points, empty ones dropped, sorted by start (a longer one first at
	// the same start). Overlaps are kept: entities may nest (bold over a
	// mention).
	spans []span
}

// span is one entity's range [Start, End) in UTF-16 code units, within the
// text.
type span struct {
	Type       string
	Start, End int
	User       *tgbotapi.User
}

// parseEntities clamps, snaps and sorts ents against text.
func parseEntities(text string, ents []tgbotapi.MessageEntity) entityText {
	et := entityText{units: utf16.Encode([]rune(text))}
	for _, e := range ents {
		start, end := et.clamp(e.Offset, e.Length)
		if start < end {
			et.spans = append(et.spans, span{Type: e.Type, Start: start, End: end, User: e.User})
		}
	}
	slices.SortStableFunc(et.spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End))
	})
	return et
}

// clamp turns an entity's offset and length into a range within the text,
// widened to whole code points (a boundary inside a surrogate pair moves
// out of it). Arithmetic cannot overflow: both ends are bounded first.
func (et entityText) clamp(off, n int) (int, int) {
	size := len(et.units)
	start := min(max(off, 0), size)
	end := start
	if n > 0 {
		switch {
		case off >= size:
			end = size
		case off < 0:
			end = min(max(off+n, 0), size) // opposite signs: no overflow
		default:
			end = min(off+min(n, size), size)
		}
	}
	// utf16.Encode makes only whole pairs: a low half follows a high one.
	if start < size && isLow(et.units[start]) {
		start--
	}
	if end < size && isLow(et.units[end]) {
		end++
	}
	return start, max(start, end)
}

// isLow reports whether u is the second half of a surrogate pair.
func isLow(u uint16) bool { return u >= 0xDC00 && u <= 0xDFFF }

// text is the text of range s.
func (et entityText) text(s span) string {
	return string(utf16.Decode(et.units[s.Start:s.End]))
}

// without returns the text with the ranges cut out. The ranges are sorted,
// clamped and merged first, so ranges given out of order, overlapping or
// repeated remove each code unit once.
func (et entityText) without(cut []span) string {
	rs := make([][2]int, 0, len(cut))
	for _, s := range cut {
		start, end := et.clamp(s.Start, s.End-s.Start)
		if start < end {
			rs = append(rs, [2]int{start, end})
		}
	}
	slices.SortFunc(rs, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := make([]uint16, 0, len(et.units))
	at := 0
	for _, r := range rs {
		if r[0] > at {
			out = append(out, et.units[at:r[0]]...)
		}
		at = max(at, r[1])
	}
	if at < len(et.units) {
		out = append(out, et.units[at:]...)
	}
	return string(utf16.Decode(out))
}
