package config

import (
	"errors"
	"strconv"
	"strings"
)

// maxTokens bounds any token count read from the config, far above any real
// window, so arithmetic on it can never overflow.
const maxTokens = 1 << 30

var errContextLimit = errors.New("want auto, full or a token count such as 200k, 1m or 272000")

// ParseContextLimit reads a context_limit. "auto" and "full" give 0, since
// their size depends on the window and the response reserve, which the
// runtime's request budget computes. A token step gives its tokens: 200k is
// 200000, 1m is 1000000, 272000 is itself.
func ParseContextLimit(s string) (int, error) {
	switch s {
	case ContextAuto, ContextFull:
		return 0, nil
	}
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1000, s[:len(s)-1]
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult, s = 1000000, s[:len(s)-1]
	}
	// Digits only: no sign, no spaces, no 0x, so what is read is what is meant.
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || len(s) > 10 {
		return 0, errContextLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > maxTokens/mult {
		return 0, errContextLimit
	}
	return n * mult, nil
}

// ContextLimitTokens returns the fixed limit context_limit names, in tokens,
// or 0 for auto and full (see ParseContextLimit). A validated Model never
// returns an error.
func (m Model) ContextLimitTokens() (int, error) {
	return ParseContextLimit(m.ContextLimit)
}
