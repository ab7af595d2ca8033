package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
)

// output is the JSON a hook may print on stdout, the fields of Claude Code's
// hook output that the compaction events use. Other fields (suppressOutput,
// systemMessage, ...) are accepted and ignored, so a hook written for Claude
// Code is never refused for them.
type output struct {
	// Continue false stops what the event was about, with StopReason.
	Continue   *bool  `json:"continue"`
	StopReason string `json:"stopReason"`
	// Decision "block" blocks a PreCompact, with Reason.
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// HookSpecificOutput carries SessionStart's additionalContext.
	HookSpecificOutput *struct {
		HookEventName     string `json:"hookEventName"`
		AdditionalContext string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// parseOutput reads a hook's stdout. Like Claude Code, stdout is JSON when it
// is a JSON object (after surrounding space) and plain text otherwise, so
// isJSON is false and err nil for text. Text that starts with { but is not a
// valid object of the right field types is an error: the hook meant JSON, and
// guessing what it meant could block or inject the wrong thing.
func parseOutput(stdout []byte) (out output, isJSON bool, err error) {
	b := bytes.TrimSpace(stdout)
	if len(b) == 0 || b[0] != '{' {
		return output{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&out); err != nil {
		return output{}, false, errInvalidJSON(err)
	}
	if dec.InputOffset() != int64(len(b)) {
		return output{}, false, errors.New("not valid hook JSON: text after the object")
	}
	return out, true, nil
}

func errInvalidJSON(err error) error {
	return errors.New("not valid hook JSON: " + err.Error())
}
