package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutside classifies every path refused because it would leave the
// workspace (absolute, .., a symlink leading out) or cannot name a file in it
// (a NUL byte). errors.Is(err, ErrOutside) holds for all of them.
var ErrOutside = errors.New("path outside the workspace")

// outsideError is a refused path. Its message says why in words the model can
// act on, without repeating the class.
type outsideError struct{ msg string }

func (e *outsideError) Error() string        { return e.msg }
func (e *outsideError) Is(target error) bool { return target == ErrOutside }

func outside(format string, args ...any) error {
	return &outsideError{msg: fmt.Sprintf(format, args...)}
}

// maxPath bounds a path argument, well above any real relative path.
const maxPath = 4096

// workspace is the confined folder, known by its real path: every symlink
// resolved, so "inside" is a plain prefix test on real paths.
type workspace struct {
	real string
	// private are real paths inside real that no path may resolve into
	// (Options.Private); folders outside the workspace need no entry.
	private []string
}

// openWorkspace makes dir ready (created 0700 when missing) and resolves it,
// and the private folders that lie inside it.
func openWorkspace(dir string, private ...string) (workspace, error) {
	if dir == "" {
		return workspace{}, errors.New("tools: no workspace given")
	}
	if strings.ContainsRune(dir, 0) {
		return workspace{}, errors.New("tools: workspace path contains a NUL byte")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return workspace{}, fmt.Errorf("tools: workspace %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return workspace{}, fmt.Errorf("tools: create workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workspace{}, fmt.Errorf("tools: workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return workspace{}, fmt.Errorf("tools: workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return workspace{}, fmt.Errorf("tools: workspace %s is not a directory", dir)
	}
	w := workspace{real: real}
	for _, p := range private {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r // a private folder not made yet is kept by its absolute path
		}
		if w.contains(abs) {
			w.private = append(w.private, abs)
		}
	}
	return w, nil
}

// resolve turns a path the model gave into the slash-separated path of the
// real object inside the workspace ("." for the workspace itself). It refuses
// NUL bytes, absolute paths and .. leading out, then walks the path one
// component at a time with Lstat: each symlink met is resolved and must land
// inside the workspace, so the result names no symlink at all. What does not
// exist yet is appended as written (it cannot be a symlink).
//
// The operations then go through an os.Root of the workspace with the
// resolved path, so a symlink planted between this check and the use is
// still refused by the kernel walk, never followed out.
func (w workspace) resolve(p string) (string, error) {
	if err := lexical(p); err != nil {
		return "", err
	}
	clean := filepath.Clean(p)
	if clean == "." {
		return ".", w.notPrivate(p, w.real)
	}
	parts := strings.Split(clean, string(filepath.Separator))
	cur := w.real
	for i, part := range parts {
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			cur = filepath.Join(append([]string{next}, parts[i+1:]...)...)
			break
		}
		if err != nil {
			return "", pathError(p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(next)
			if errors.Is(err, fs.ErrNotExist) {
				return "", outside("path %s goes through a symlink whose target does not exist", quote(p))
			}
			if err != nil {
				return "", pathError(p, err)
			}
			if !w.contains(target) {
				return "", outside("path %s leads out of the workspace through a symlink", quote(p))
			}
			fi, err = os.Stat(target)
			if err != nil {
				return "", pathError(p, err)
			}
			next = target
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return "", fmt.Errorf("path %s: %s is not a directory", quote(p), quote(w.rel(next)))
		}
		cur = next
	}
	if !w.contains(cur) { // cannot happen after the checks above; kept as the invariant
		return "", outside("path %s leads out of the workspace", quote(p))
	}
	if err := w.notPrivate(p, cur); err != nil {
		return "", err
	}
	return w.rel(cur), nil
}

// notPrivate refuses p when its real path cur lies in a private folder.
func (w workspace) notPrivate(p, cur string) error {
	for _, priv := range w.private {
		if cur == priv || strings.HasPrefix(cur, priv+string(filepath.Separator)) {
			return outside("path %s is in Mirror's data directory, which the tools never touch", quote(p))
		}
	}
	return nil
}

// lexical refuses what no walk is needed to refuse.
func lexical(p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return outside("path %s contains a NUL byte", quote(p))
	case len(p) > maxPath:
		return outside("path is %d bytes long, more than the %d allowed", len(p), maxPath)
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return outside("path %s is absolute; give a path relative to the workspace, such as notes/todo.md", quote(p))
	}
	if p == "" {
		return nil // the workspace itself
	}
	if !filepath.IsLocal(p) {
		return outside("path %s leads out of the workspace (..)", quote(p))
	}
	return nil
}

func (w workspace) contains(real string) bool {
	return real == w.real || strings.HasPrefix(real, w.real+string(filepath.Separator))
}

// rel is the slash-separated path of real inside the workspace.
func (w workspace) rel(real string) string {
	r, err := filepath.Rel(w.real, real)
	if err != nil {
		return "."
	}
	return filepath.ToSlash(r)
}

// pathError reports a failed Lstat or Stat without the workspace's own
// absolute path, which the model has no use for.
func pathError(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("path %s: %w", quote(p), err)
}

// root opens the workspace as an os.Root for one operation.
func (w workspace) root() (*os.Root, error) {
	r, err := os.OpenRoot(w.real)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return r, nil
}

// open resolves p and opens the workspace root for one operation on it: the
// one way every file tool (send_file included) turns a model's path into a
// place, so all apply the same checks. The caller closes root.
func (w workspace) open(p string) (rel string, root *os.Root, err error) {
	rel, err = w.resolve(p)
	if err != nil {
		return "", nil, err
	}
	root, err = w.root()
	if err != nil {
		return "", nil, err
	}
	return rel, root, nil
}
