package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// HandoffFile is the name of the handoff template beside runtime.yaml.
const HandoffFile = "handoff.md"

// maxHandoffTemplate bounds the template read from disk: it is a page of
// layout, and it is read at every boundary.
const maxHandoffTemplate = 64 << 10

//go:embed handoff.md
var defaultHandoff string

// DefaultHandoffTemplate is the built-in handoff template (config/handoff.md
// of the source tree): a Go text/template the boundary package renders.
func DefaultHandoffTemplate() string { return defaultHandoff }

// HandoffTemplate returns the handoff template in effect for the config read
// from dir (Config.Dir): the handoff.md beside runtime.yaml when there is
// one, else the built-in one. It is read on every call, so an edit to the
// file changes the next record without a restart. dir "" means the built-in
// defaults. A file that is there but cannot be read, is not a regular file,
// or is too large is an error, not a silent fallback: the operator asked for
// that layout. Whether it parses is for the renderer to say.
func HandoffTemplate(dir string) (string, error) {
	if dir == "" {
		return defaultHandoff, nil
	}
	path := filepath.Join(dir, HandoffFile)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return defaultHandoff, nil
	}
	if err != nil {
		return "", fmt.Errorf("handoff template: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("handoff template %s: not a regular file", path)
	}
	if fi.Size() > maxHandoffTemplate {
		return "", fmt.Errorf("handoff template %s: %d bytes, more than the %d allowed", path, fi.Size(), maxHandoffTemplate)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("handoff template: %w", err)
	}
	return string(data), nil
}
