// Package ids owns the formats of the ids Mirror writes into records and
// onto the wire: messages, turns, chats, approvals, recoveries, sessions,
// stored tool outputs and the tool-call ids Mirror makes up itself. Each
// format's writer sits beside its parser, so an id written by one package
// is read the same way by every other (chats, runtime, the transports).
//
// Parsers accept exactly what the writers write (write(parse(s)) == s) and
// refuse anything else, so an id a person typed or a client sent is either
// one Mirror made or an error, never a near miss read as another id.
// The package imports nothing of Mirror's, so every layer may use it.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Prefixes of the formats. A format's prefix says what the id names, so ids
// of different kinds never collide in a log line or a frame.
const (
	prefixMessage  = "m"
	prefixTurn     = "t"
	prefixChat     = "c_"
	prefixApproval = "a_"
	prefixRecovery = "r_"
	prefixSession  = "s_"
	prefixOutput   = "out_"
	prefixCall     = "call_"
	prefixImage    = "img_"
)

// nonceBytes is the size of the random part of chat, approval, recovery and
// session ids: 64 bits, so they are not guessable (an answer names its
// approval by id alone) and do not collide in practice.
const nonceBytes = 8

// outputBytes is how much of a tool output's sha256 its handle carries.
const outputBytes = 8

// Message is the id of the message the chat's event seq created: "m<seq>".
func Message(seq uint64) string { return prefixMessage + strconv.FormatUint(seq, 10) }

// ParseMessage reads an id Message wrote; ok is false for anything else.
func ParseMessage(id string) (seq uint64, ok bool) { return number(id, prefixMessage) }

// CitedMessage reads a message id as the assistant or a person may cite
// it: as Message writes it, or its bare number ("12" for "m12").
func CitedMessage(s string) (seq uint64, ok bool) { return cited(s, prefixMessage) }

// Turn is the id of the turn that event n of its chat started: "t<n>".
func Turn(n uint64) string { return prefixTurn + strconv.FormatUint(n, 10) }

// ParseTurn reads an id Turn wrote; ok is false for anything else.
func ParseTurn(id string) (n uint64, ok bool) { return number(id, prefixTurn) }

// CitedTurn reads a turn id as a person may type it (/rewind 12): as Turn
// writes it, or its bare number.
func CitedTurn(s string) (n uint64, ok bool) { return cited(s, prefixTurn) }

// NewChat makes a new chat id: "c_" and 16 random hex digits. Chat ids
// reach file paths (data_dir/workstreams/<chat>), so the format stays
// within ASCII letters, digits and _.
func NewChat() string { return prefixChat + nonce() }

// ParseChat reports whether id is one NewChat could have made.
func ParseChat(id string) bool {
	rest, ok := strings.CutPrefix(id, prefixChat)
	return ok && isNonce(rest)
}

// NewApproval makes the id of a call of chat waiting for permission:
// "a_<chat>_<16 random hex digits>". It names its chat, so an answer from
// any transport reaches the chat that owns the call.
func NewApproval(chat string) string { return owned(prefixApproval, chat, nonce()) }

// ParseApproval returns the chat an approval id names; ok is false for
// anything NewApproval does not write.
func ParseApproval(id string) (chat string, ok bool) { return parseOwned(id, prefixApproval) }

// NewRecovery makes the id of an interrupted call of chat:
// "r_<chat>_<16 random hex digits>", named like an approval for the same
// reason.
func NewRecovery(chat string) string { return owned(prefixRecovery, chat, nonce()) }

// ParseRecovery returns the chat a recovery id names; ok is false for
// anything NewRecovery does not write.
func ParseRecovery(id string) (chat string, ok bool) { return parseOwned(id, prefixRecovery) }

// RecoveryPrefix is what every recovery id of chat starts with, for a scan
// of the ids a store keeps in order.
func RecoveryPrefix(chat string) string { return prefixRecovery + chat + "_" }

// NewSession makes a WebSocket session id: "s_" and 16 random hex digits.
func NewSession() string { return prefixSession + nonce() }

// ParseSession reports whether id is one NewSession could have made.
func ParseSession(id string) bool {
	rest, ok := strings.CutPrefix(id, prefixSession)
	return ok && isNonce(rest)
}

// Output is the handle a tool output longer than its preview is stored
// under: "out_" and the first 8 bytes of its sha256 in hex, so the same
// output is stored once.
func Output(full string) string {
	sum := sha256.Sum256([]byte(full))
	return prefixOutput + hex.EncodeToString(sum[:outputBytes])
}

// ParseOutput reports whether handle is one Output could have written.
func ParseOutput(handle string) bool {
	rest, ok := strings.CutPrefix(handle, prefixOutput)
	return ok && len(rest) == 2*outputBytes && isHex(rest)
}

// imageDigits is how many hex digits of an image's sha256 its handle
// carries: 64 bits, unique among one chat's images.
const imageDigits = 16

// Image is the handle a checkpoint's pointer gives an image it masked
// (tool_output gives the image back by it): "img_" and the first 16 hex
// digits of the image's sha256 (lowercase hex, as blobs are named).
func Image(sha256 string) string {
	return prefixImage + strings.ToLower(sha256[:min(len(sha256), imageDigits)])
}

// ParseImage returns the sha256 prefix of a handle Image wrote; ok is
// false for anything else.
func ParseImage(handle string) (prefix string, ok bool) {
	rest, ok := strings.CutPrefix(handle, prefixImage)
	if !ok || len(rest) != imageDigits || !isHex(rest) {
		return "", false
	}
	return rest, true
}

// Call is a tool-call id Mirror makes up where the provider gives none
// (Gemini, the builtin model): "call_" and suffix, the form OpenAI's own
// ids take. suffix must be non-empty ASCII letters, digits, _ or -.
func Call(suffix string) string { return prefixCall + suffix }

// ParseCall returns the suffix of an id Call wrote; ok is false for
// anything else. Call ids a provider made in another form (Anthropic's
// "toolu_…") are opaque and never parsed.
func ParseCall(id string) (suffix string, ok bool) {
	rest, ok := strings.CutPrefix(id, prefixCall)
	if !ok || rest == "" {
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return rest, true
}

// number reads prefix followed by a decimal number in the form
// strconv.FormatUint writes (no sign, no leading zeros).
func number(id, prefix string) (uint64, bool) {
	digits, ok := strings.CutPrefix(id, prefix)
	if !ok || digits == "" || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// cited reads prefix and a number, or the number alone.
func cited(s, prefix string) (uint64, bool) {
	if n, ok := number(s, prefix); ok {
		return n, true
	}
	return number(s, "")
}

// owned writes an id that names the chat it belongs to. The nonce has no
// "_", so the chat part ends at the last one whatever the chat id holds.
func owned(prefix, chat, nonce string) string { return prefix + chat + "_" + nonce }

func parseOwned(id, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 || !isNonce(rest[i+1:]) {
		return "", false
	}
	return rest[:i], true
}

// nonce is 64 random bits in lowercase hex.
func nonce() string {
	var b [nonceBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand.Read never returns an error (Go 1.24+)
	}
	return hex.EncodeToString(b[:])
}

func isNonce(s string) bool { return len(s) == 2*nonceBytes && isHex(s) }

// isHex reports whether s is lowercase hex, as encoding/hex writes it.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
