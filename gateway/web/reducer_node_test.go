package web

import (
	"io/fs"
	"os"
	"path/filepath"
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
	js, err := fs.Glob(Static(), "*.js")
	if err != nil || len(js) == 0 {
		t.Fatalf("no static modules (%v)", err)
	}
	test, err := os.ReadFile(filepath.Join("testdata", "reducer.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"reducer.test.mjs": test,
		"package.json":     []byte(`{"type":"module"}`), // the .js modules are ES modules
	}
	for _, name := range js {
		files[name] = []byte(readStatic(t, name))
	}
	runNode(t, files, "--test", "reducer.test.mjs")
}
