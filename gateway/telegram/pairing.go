package telegram

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Printable returns s with what could take over a terminal or reorder a
// line written as Go escapes: control characters (C0, DEL, C1: \x1b,
// \n, \u009b), the bidirectional overrides and isolates (\u202e), line
// and paragraph separators, and bytes that are not UTF-8 (\xff). A
// stranger chooses their Telegram name, and `mirror pair list` prints it
// to the owner's terminal. Backslashes are left alone, so Printable of
// its own output changes nothing.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether r is one Printable escapes.
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', // bidi marks
		r >= '\u202a' && r <= '\u202e', // embeddings and overrides
		r >= '\u2066' && r <= '\u2069', // isolates
		r == '\u2028', r == '\u2029':   // line and paragraph separators
		return true
	}
	return false
}

// pruneExpired deletes the pairing codes that can no longer be approved:
// called where codes are made, so they never pile up.
func pruneExpired(bk stateBucket, now time.Time) error {
	var old [][]byte
	c := bk.Cursor()
	for k, v := c.Seek([]byte("p/")); k != nil && strings.HasPrefix(string(k), "p/"); k, v = c.Next() {
		var p Pairing
		if json.Unmarshal(v, &p) != nil || !now.Before(p.ExpiresAt) {
			old = append(old, append([]byte(nil), k...))
		}
	}
	for _, k := range old {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// shown is p as it may be displayed: its name made Printable (records
// stored before names were escaped may hold anything).
func (p Pairing) shown() Pairing {
	p.Name = Printable(p.Name)
	return p
}
