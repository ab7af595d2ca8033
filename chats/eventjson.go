package chats

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Hand-written encoders for the events every turn writes (message.accepted,
// message.picked, turn.started, context, runtime.context, reply.delta,
// turn.finished): encoding/json's reflection over the flat frame was a
// twentieth of the gateway's CPU under load. Each writes exactly the bytes
// Marshal(p.frame(h)) writes (field order, omitempty, escaping with HTML
// left alone, RawMessage compacted); a value they do not cover (a
// message's tool calls or attachments, a time outside the years JSON
// allows) makes them decline, and the reflective encoder writes the event
// as before. TestFastFrameMatchesReflection and FuzzFastFrame compare the
// two.

// fastFrameSize says whether appendFastFrame covers p, and about how many
// bytes its frame takes.
func fastFrameSize(p Payload) (int, bool) {
	var m *Message
	size := 160
	switch p := p.(type) {
	case *TurnStarted, *ContextReading:
		return size + 160, true
	case *RuntimeContext:
		return size + len(p.Sections), true
	case *ReplyDelta:
		return size + len(p.Text) + len(p.Text)/8, true
	case *MessageAccepted:
		m = p.Message
	case *MessagePicked:
		m = p.Message
	case *TurnFinished:
		m = p.Message
		size += 160 + len(p.Reply) + len(p.Reply)/8
	default:
		return 0, false
	}
	if m == nil {
		return size, true
	}
	if len(m.ToolCalls) > 0 || len(m.Attachments) > 0 || len(m.Sections) > 0 {
		return 0, false
	}
	return size + 160 + len(m.Text) + len(m.Text)/8, true
}

// appendFastFrame appends the frame of h and p to dst; ok is false when p
// is not one the fast encoders cover (dst is then unusable).
func appendFastFrame(dst []byte, h *Header, p Payload) (_ []byte, ok bool) {
	switch p := p.(type) {
	case *TurnStarted:
		dst, ok = appendHeader(dst, h)
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
	case *ReplyDelta:
		dst, ok = appendHeader(dst, h)
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
		dst = append(dst, `,"offset":`...)
		dst = strconv.AppendInt(dst, int64(p.Offset), 10)
		dst = appendStrOmit(dst, `,"text":`, p.Text)
	case *MessageAccepted:
		dst, ok = appendHeader(dst, h)
		if ok && p.Message != nil {
			dst, ok = appendMessage(append(dst, `,"message":`...), p.Message)
		}
	case *MessagePicked:
		dst, ok = appendHeader(dst, h)
		if ok && p.Message != nil {
			dst, ok = appendMessage(append(dst, `,"message":`...), p.Message)
		}
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
	case *TurnFinished:
		dst, ok = appendHeader(dst, h)
		if ok && p.Message != nil {
			dst, ok = appendMessage(append(dst, `,"message":`...), p.Message)
		}
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
		dst = appendJSONString(append(dst, `,"reply":`...), p.Reply)
		dst = appendUsage(append(dst, `,"usage":`...), p.Usage)
		dst = appendStrOmit(dst, `,"model":`, p.Model)
		dst = appendTrueOmit(dst, `,"fallback":true`, p.Fallback)
		dst = appendTrueOmit(dst, `,"stopped":true`, p.Stopped)
		if m := p.Measured; m != nil {
			// view.Measurement has no tags: its Go names, Basis's inline.
			dst = strconv.AppendInt(append(dst, `,"measured":{"Tokens":`...), int64(m.Tokens), 10)
			dst = strconv.AppendUint(append(dst, `,"Epoch":`...), m.Epoch, 10)
			dst = strconv.AppendUint(append(dst, `,"Seq":`...), m.Seq, 10)
			dst = appendStrOmit(dst, `,"Model":`, m.Model)
			dst = appendStrOmit(dst, `,"Prompt":`, m.Prompt)
			dst = appendStrOmit(dst, `,"Tools":`, m.Tools)
			dst = append(dst, '}')
		}
		dst = appendTrueOmit(dst, `,"pruned":true`, p.Pruned)
		dst = appendIntOmit(dst, `,"held":`, int64(p.Held))
	case *ContextReading:
		dst, ok = appendHeader(dst, h)
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
		// Its Model shadows ContextInfo's, which is left out.
		dst = appendStrOmit(dst, `,"model":`, p.Model)
		if c := p.ContextInfo; c != nil {
			dst = strconv.AppendInt(append(dst, `,"used":`...), int64(c.Used), 10)
			dst = strconv.AppendInt(append(dst, `,"window":`...), int64(c.Window), 10)
			dst = strconv.AppendInt(append(dst, `,"soft":`...), int64(c.Soft), 10)
			dst = strconv.AppendInt(append(dst, `,"hard":`...), int64(c.Hard), 10)
			dst = strconv.AppendBool(append(dst, `,"soft_reached":`...), c.SoftReached)
			dst = strconv.AppendBool(append(dst, `,"hard_reached":`...), c.HardReached)
			dst = appendIntOmit(dst, `,"request":`, int64(c.Request))
			dst = appendIntOmit(dst, `,"ceiling":`, int64(c.Ceiling))
			dst = appendIntOmit(dst, `,"next_checkpoint":`, int64(c.NextCheckpoint))
			dst = appendStrOmit(dst, `,"line":`, c.Line)
		}
	case *RuntimeContext:
		dst, ok = appendHeader(dst, h)
		dst = appendStrOmit(dst, `,"turn":`, p.Turn)
		if len(p.Sections) > 0 {
			// A RawMessage is written compacted, and refused when invalid.
			b := bytes.NewBuffer(append(dst, `,"sections":`...))
			if json.Compact(b, p.Sections) != nil {
				return dst, false
			}
			dst = b.Bytes()
		}
		dst = appendIntOmit(dst, `,"tokens":`, int64(p.Tokens))
	default:
		return dst, false
	}
	return append(dst, '}'), ok
}

// appendHeader appends the frame's opening brace and the header's fields.
func appendHeader(dst []byte, h *Header) ([]byte, bool) {
	dst = appendJSONString(append(dst, `{"type":`...), h.Type)
	dst = appendJSONString(append(dst, `,"chat":`...), h.Chat)
	dst = strconv.AppendUint(append(dst, `,"seq":`...), h.Seq, 10)
	dst, ok := appendTime(append(dst, `,"time":`...), h)
	dst = appendStrOmit(dst, `,"by":`, h.By)
	return dst, ok
}

// appendTime is time.Time's MarshalJSON without its allocation; a time it
// refuses makes the encoder decline.
func appendTime(dst []byte, h *Header) ([]byte, bool) {
	return appendTimeOf(dst, h.Time.Year(), h.Time.AppendText)
}

func appendTimeOf(dst []byte, year int, text func([]byte) ([]byte, error)) ([]byte, bool) {
	if year < 0 || year > 9999 {
		return dst, false
	}
	dst = append(dst, '"')
	dst, err := text(dst)
	if err != nil {
		return dst, false
	}
	return append(dst, '"'), true
}

// appendMessage appends m as encoding/json writes it; ok is false for a
// message with tool calls, attachments or sections (left to reflection).
func appendMessage(dst []byte, m *Message) ([]byte, bool) {
	if len(m.ToolCalls) > 0 || len(m.Attachments) > 0 || len(m.Sections) > 0 {
		return dst, false
	}
	dst = appendJSONString(append(dst, `{"id":`...), m.ID)
	dst = appendJSONString(append(dst, `,"role":`...), m.Role)
	dst = appendJSONString(append(dst, `,"text":`...), m.Text)
	dst = strconv.AppendUint(append(dst, `,"seq":`...), m.Seq, 10)
	dst, ok := appendTimeOf(append(dst, `,"time":`...), m.Time.Year(), m.Time.AppendText)
	dst = appendStrOmit(dst, `,"state":`, m.State)
	dst = appendStrOmit(dst, `,"mode":`, m.Mode)
	dst = appendStrOmit(dst, `,"client_id":`, m.ClientID)
	dst = appendStrOmit(dst, `,"by":`, m.By)
	dst = appendStrOmit(dst, `,"turn":`, m.Turn)
	dst = appendTrueOmit(dst, `,"stopped":true`, m.Stopped)
	dst = appendIntOmit(dst, `,"tokens":`, int64(m.Tokens))
	dst = appendStrOmit(dst, `,"tool_call_id":`, m.ToolCallID)
	dst = appendTrueOmit(dst, `,"pinned":true`, m.Pinned)
	dst = appendStrOmit(dst, `,"tool":`, m.Tool)
	dst = appendTrueOmit(dst, `,"is_error":true`, m.IsError)
	if m.TextAt != 0 {
		dst = strconv.AppendUint(append(dst, `,"text_at":`...), m.TextAt, 10)
	}
	dst = appendStrOmit(dst, `,"transcribe_error":`, m.TranscribeError)
	dst = appendStrOmit(dst, `,"model":`, m.Model)
	dst = appendTrueOmit(dst, `,"fallback":true`, m.Fallback)
	dst = appendStrOmit(dst, `,"regenerates":`, m.Regenerates)
	return append(dst, '}'), ok
}

func appendUsage(dst []byte, u provider.Usage) []byte {
	dst = strconv.AppendInt(append(dst, `{"input":`...), int64(u.InputTokens), 10)
	dst = strconv.AppendInt(append(dst, `,"output":`...), int64(u.OutputTokens), 10)
	dst = strconv.AppendInt(append(dst, `,"cached":`...), int64(u.CachedTokens), 10)
	return append(dst, '}')
}

func appendStrOmit(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

func appendIntOmit(dst []byte, key string, n int64) []byte {
	if n == 0 {
		return dst
	}
	return strconv.AppendInt(append(dst, key...), n, 10)
}

func appendTrueOmit(dst []byte, field string, b bool) []byte {
	if !b {
		return dst
	}
	return append(dst, field...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping
// off (as Marshal sets it): quotes, backslashes and control bytes escaped,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
