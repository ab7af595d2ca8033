package openai

import (
	"encoding/json"
	"strconv"
	"unsafe"
)

// fastChunk decodes the chunk shape nearly every streamed event has —
// {"id":…,"object":…,"created":…,"model":…,"choices":[{"index":0,
// "delta":{"role":…,"content":"…"},"finish_reason":null}]} — without
// encoding/json's reflection, into s.scratch. It reports false for anything
// else: an unknown or repeated key, a key in another case, tool calls,
// images, error objects, a usage object with other fields than OpenAI's
// and DeepSeek's token counts, more than one choice, a number where a
// string belongs, invalid JSON, trailing bytes. The caller then takes
// json.Unmarshal, so the fast path only has to be exact on what it accepts:
// FuzzFastChunk compares it with json.Unmarshal on the same bytes.
//
// The chunk's "model" is only converted to a string while s.model is
// unset, as apply reads it only then.
func (s *stream) fastChunk(data []byte) (*wireChunk, bool) {
	p := fastParser{b: data}
	ch := &s.scratch
	*ch = wireChunk{}
	ok := p.fields(chunkKeys, func(i int) bool {
		switch i {
		case 0: // model
			if s.model != "" {
				return p.skipStringOrNull()
			}
			m, ok := p.stringOrNull()
			ch.Model = m
			return ok
		case 1:
			return p.choices(s, ch)
		case 2: // usage
			if p.peek() == 'n' {
				return p.null()
			}
			return p.usage(s, ch)
		case 5: // created
			return p.number()
		default: // id, object, system_fingerprint, service_tier
			return p.skipStringOrNull()
		}
	})
	if !ok || !p.end() {
		return nil, false
	}
	return ch, true
}

// fastParser is a strict JSON reader of the subset fastChunk accepts.
type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

func (p *fastParser) lit(s string) bool {
	p.ws()
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *fastParser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *fastParser) null() bool { return p.lit("null") }

// object reads {"key": value, ...}; field reads each value. Keys must be
// plain ASCII without escapes (a key with an escape takes the full
// decoder, which matches keys case-insensitively and after unescaping).
func (p *fastParser) object(field func(key []byte) bool) bool {
	if !p.lit("{") {
		return false
	}
	if p.lit("}") {
		return true
	}
	for {
		if !p.lit(`"`) {
			return false
		}
		start := p.i
		for p.i < len(p.b) && p.b[p.i] != '"' {
			c := p.b[p.i]
			if c == '\\' || c < 0x20 || c >= 0x80 {
				return false
			}
			p.i++
		}
		if p.i == len(p.b) {
			return false
		}
		key := p.b[start:p.i]
		p.i++
		if !p.lit(":") || !field(key) {
			return false
		}
		if p.lit(",") {
			continue
		}
		return p.lit("}")
	}
}

// The keys each object of the fast path may hold, in the order its
// reader's cases number them.
var (
	chunkKeys  = []string{"model", "choices", "usage", "id", "object", "created", "system_fingerprint", "service_tier"}
	choiceKeys = []string{"index", "delta", "finish_reason", "logprobs"}
	deltaKeys  = []string{"content", "refusal", "role"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
		"completion_tokens_details", "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}
	detailKeys = []string{"cached_tokens", "audio_tokens"}
)

// fields reads an object whose keys are among names, each at most once
// (encoding/json would keep the last of a repeated key: the full decoder
// takes those), calling read with the key's index in names.
func (p *fastParser) fields(names []string, read func(i int) bool) bool {
	var seen uint32
	return p.object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return read(i)
			}
		}
		return false
	})
}

// rawString returns the bytes of a string literal, quotes included, and
// whether it is plain (printable ASCII without escapes, so its value is
// its bytes between the quotes).
func (p *fastParser) rawString() (lit []byte, plain, ok bool) {
	if p.peek() != '"' {
		return nil, false, false
	}
	start := p.i
	p.i++
	plain = true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start:p.i], plain, true
		case c == '\\':
			plain = false
			p.i += 2 // the escaped byte is never the closing quote
		case c < 0x20:
			return nil, false, false
		case c >= 0x80:
			plain = false
			p.i++
		default:
			p.i++
		}
	}
	return nil, false, false
}

// str reads a string literal's value: plain ones directly, others
// (escapes, non-ASCII bytes that may be invalid UTF-8) through
// json.Unmarshal of the literal alone, which is exactly what decoding it
// inside the chunk gives.
func (p *fastParser) str() (string, bool) {
	lit, plain, ok := p.rawString()
	if !ok {
		return "", false
	}
	if plain {
		return string(lit[1 : len(lit)-1]), true
	}
	var v string
	if json.Unmarshal(lit, &v) != nil {
		return "", false
	}
	return v, true
}

func (p *fastParser) stringOrNull() (string, bool) {
	if p.peek() == 'n' {
		return "", p.null()
	}
	return p.str()
}

// viewOrNull is stringOrNull, except that a plain string's value is the
// event's own bytes, not a copy: valid only until the event's data
// changes (the next event), so only for text that apply copies before
// then (a delta's content and refusal, see stream.keep).
func (p *fastParser) viewOrNull() (string, bool) {
	if p.peek() == 'n' {
		return "", p.null()
	}
	lit, plain, ok := p.rawString()
	if !ok {
		return "", false
	}
	if plain {
		if len(lit) == 2 {
			return "", true
		}
		return unsafe.String(&lit[1], len(lit)-2), true
	}
	var v string
	if json.Unmarshal(lit, &v) != nil {
		return "", false
	}
	return v, true
}

// skipStringOrNull checks a string or null whose value is not used.
func (p *fastParser) skipStringOrNull() bool {
	if p.peek() == 'n' {
		return p.null()
	}
	lit, plain, ok := p.rawString()
	if !ok {
		return false
	}
	return plain || json.Valid(lit)
}

// number checks a JSON number whose value is not used.
func (p *fastParser) number() bool {
	p.ws()
	b, i := p.b, p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	p.i = i
	return true
}

// index reads a choice's index: a plain integer (no fraction, exponent or
// leading zero) that fits an int, as encoding/json accepts for an int.
func (p *fastParser) index() (int, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	d := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == d || (p.b[d] == '0' && p.i-d > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	n, err := strconv.Atoi(string(p.b[start:p.i]))
	return n, err == nil
}

// choices reads an array of at most one choice into the stream's own
// one-element array, so a chunk costs no slice.
func (p *fastParser) choices(s *stream, ch *wireChunk) bool {
	if !p.lit("[") {
		return false
	}
	if p.lit("]") {
		ch.Choices = s.choice[:0]
		return true
	}
	c := &s.choice[0]
	*c = wireChoice{}
	ok := p.fields(choiceKeys, func(i int) bool {
		switch i {
		case 0:
			n, ok := p.index()
			c.Index = n
			return ok
		case 1:
			return p.delta(c)
		case 2:
			v, ok := p.stringOrNull()
			c.FinishReason = v
			return ok
		default:
			return p.null() // log probabilities are not used; anything else takes the full decoder
		}
	})
	if !ok || !p.lit("]") {
		return false
	}
	ch.Choices = s.choice[:1]
	return true
}

// delta reads a delta of content, refusal and role only. Its content and
// refusal are views of the event's bytes (viewOrNull).
func (p *fastParser) delta(c *wireChoice) bool {
	return p.fields(deltaKeys, func(i int) bool {
		switch i {
		case 0:
			v, ok := p.viewOrNull()
			c.Delta.Content = v
			return ok
		case 1:
			v, ok := p.viewOrNull()
			c.Delta.Refusal = v
			return ok
		default:
			return p.skipStringOrNull()
		}
	})
}

// integer reads an int field's value: what index accepts.
func (p *fastParser) integer(v *int) bool {
	n, ok := p.index()
	*v = n
	return ok
}

// usage reads the last chunk's usage object (OpenAI's counts and their
// details, DeepSeek's cache counts) into the stream's own, so the chunk
// every turn ends with skips the full decoder too.
func (p *fastParser) usage(s *stream, ch *wireChunk) bool {
	u := &s.usage0
	*u = wireUsage{}
	ok := p.fields(usageKeys, func(i int) bool {
		switch i {
		case 0:
			return p.integer(&u.PromptTokens)
		case 1:
			return p.integer(&u.CompletionTokens)
		case 5:
			return p.integer(&u.PromptCacheHitTokens)
		case 3: // prompt_tokens_details
			if p.peek() == 'n' {
				return p.null()
			}
			d := &s.details0
			d.CachedTokens = 0
			u.PromptTokensDetails = d
			return p.fields(detailKeys, func(i int) bool {
				if i == 0 {
					return p.integer(&d.CachedTokens)
				}
				return p.number() // audio_tokens: not used
			})
		case 4: // completion_tokens_details, not used: numbers of any name
			if p.peek() == 'n' {
				return p.null()
			}
			return p.object(func([]byte) bool { return p.number() })
		default: // total_tokens, prompt_cache_miss_tokens: not used
			return p.number()
		}
	})
	if ok {
		ch.Usage = u
	}
	return ok
}
