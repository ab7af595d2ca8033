package chats

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// scanIndexRow reads into r, from a stored row, what indexRow holds, as
// json.Unmarshal would, without reflection and without decoding the rest
// (usage, tool calls, sections: skipped over). It reads the rows this
// package writes (exact keys, one object); ok is false for anything else
// (a key in another case, a value of an unexpected kind, bytes after the
// object), and the caller then decodes the row with encoding/json, which
// says what is wrong with it. FuzzScanIndexRow compares the two.
func scanIndexRow(v []byte, r *indexRow) (ok bool) {
	s := scanner{b: v}
	ok = s.object(func(key []byte) bool {
		switch string(key) {
		case "seq":
			return s.uint(&r.Seq)
		case "time":
			return s.time(&r.Time)
		case "reply":
			return s.string(&r.Reply)
		case "record":
			return s.string(&r.Record)
		case "message":
			if s.null() {
				r.Message = nil
				return true
			}
			if r.Message == nil {
				r.Message = &indexMsg{}
			}
			m := r.Message
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "id":
					return s.string(&m.ID)
				case "role":
					return s.string(&m.Role)
				case "text":
					return s.string(&m.Text)
				case "seq":
					return s.uint(&m.Seq)
				case "time":
					return s.time(&m.Time)
				case "state":
					return s.string(&m.State)
				case "text_at":
					return s.uint(&m.TextAt)
				}
				return s.known(key) && s.skip()
			})
		}
		return s.known(key) && s.skip()
	})
	s.space()
	return ok && s.i == len(s.b)
}

// scanner reads JSON from b at i.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// peek is the next byte after white space (0 at the end).
func (s *scanner) peek() byte {
	s.space()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// known says a key the fields ask for in no other case: encoding/json
// matches keys regardless of case, this does not.
func (s *scanner) known(key []byte) bool {
	for _, f := range [...]string{"seq", "time", "reply", "record", "message", "id", "role", "text", "state", "text_at"} {
		if len(key) == len(f) && !bytes.Equal(key, []byte(f)) && bytes.EqualFold(key, []byte(f)) {
			return false
		}
	}
	return true
}

// object reads an object, calling field with each key, the scanner then
// at its value.
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.rawString()
		if !ok || bytes.IndexByte(key, '\\') >= 0 || s.peek() != ':' {
			return false
		}
		s.i++
		if !field(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// rawString reads a string and returns its bytes between the quotes,
// escapes as they are.
func (s *scanner) rawString() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], true
		case c == '\\':
			if i+1 == len(s.b) {
				return nil, false
			}
			i++ // the escaped byte cannot end the string
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) || !isHexDigit(s.b[i+1]) || !isHexDigit(s.b[i+2]) || !isHexDigit(s.b[i+3]) || !isHexDigit(s.b[i+4]) {
					return nil, false
				}
				i += 4
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// string reads a string into dst (null leaves it as it is, as
// encoding/json does).
func (s *scanner) string(dst *string) bool {
	if s.null() {
		return true
	}
	start := s.i
	raw, ok := s.rawString()
	if !ok {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		*dst = string(raw)
		return true
	}
	return json.Unmarshal(s.b[start:s.i], dst) == nil // escapes, or bytes to replace
}

// uint reads a number that is a uint64 into dst.
func (s *scanner) uint(dst *uint64) bool {
	if s.null() {
		return true
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start || (s.b[start] == '0' && s.i-start > 1) {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	n, err := strconv.ParseUint(string(s.b[start:s.i]), 10, 64)
	*dst = n
	return err == nil
}

// time reads a time as time.Time's UnmarshalJSON does.
func (s *scanner) time(dst *time.Time) bool {
	if s.null() {
		return true
	}
	start := s.i
	if _, ok := s.rawString(); !ok {
		return false
	}
	return dst.UnmarshalJSON(s.b[start:s.i]) == nil
}

// null reads null, if that is what comes next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// skip reads over a value of any kind.
func (s *scanner) skip() bool {
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.rawString()
		return ok
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skip() {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.i
		for s.i < len(s.b) && bytes.IndexByte([]byte("+-.0123456789eE"), s.b[s.i]) >= 0 {
			s.i++
		}
		return json.Valid(s.b[start:s.i])
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
				s.i += len(lit)
				return true
			}
		}
		return false
	}
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
