package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runNode writes files into a fresh folder and runs node there with args;
// a non-zero exit fails t with node's output. Without node the test skips,
// except under CI, which installs it (.ci/run): there it fails, so the
// browser client's own tests cannot silently stop running.
func runNode(t *testing.T, files map[string][]byte, args ...string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is needed in CI to run the browser client's tests")
		}
		t.Skip("node not installed")
	}
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LANG=en_US.UTF-8", "LC_ALL=en_US.UTF-8")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, strings.TrimSpace(string(out)))
	}
}

// asModule is static/NAME.js under the name NAME.mjs, which node reads as
// an ES module without a package.json beside it.
func asModule(t *testing.T, name string) (string, []byte) {
	return name + ".mjs", []byte(readStatic(t, name+".js"))
}
