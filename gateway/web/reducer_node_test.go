package web

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReducerInNode runs the events reducer (static/reducer.js) under
// node's test runner, no browser: testdata/reducer.test.mjs feeds it
// frames (a message appended, a queued message edited and deleted, a turn
// started and ended, reply text streaming, an approval asked and
// answered, a resume with since that must apply nothing twice) and checks
// the state it leaves. The static modules are copied, as embedded, next to
// the test (the test file itself is not served). Without node it skips,
// except in CI.
func TestReducerInNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is needed in CI to run the browser client's reducer tests")
		}
		t.Skip("node not installed")
	}
	dir := t.TempDir()
	js, err := fs.Glob(Static(), "*.js")
	if err != nil || len(js) == 0 {
		t.Fatalf("no static modules (%v)", err)
	}
	for _, name := range js {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(readStatic(t, name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	test, err := os.ReadFile(filepath.Join("testdata", "reducer.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"reducer.test.mjs": test,
		"package.json":     []byte(`{"type":"module"}`), // the .js modules are ES modules
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, "--test", "reducer.test.mjs")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, strings.TrimSpace(string(out)))
	}
}
