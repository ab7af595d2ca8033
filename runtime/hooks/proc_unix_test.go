//go:build unix

package hooks

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

// A hook that exits but leaves a child holding its stdout is judged by its
// own exit and output once the grace for the pipes runs out, not when the
// child ends.
func TestStragglerHoldingStdout(t *testing.T) {
	dir := t.TempDir()
	cmd := script(t, dir, "bg.sh", `ps -o pgid= -p $$ > pgid; sleep 30 & echo '{"decision":"block","reason":"left a child"}'; exit 0`)
	t.Cleanup(func() {
		// The child is the hook's, not the Runner's: the test cleans up.
		if b, err := os.ReadFile(filepath.Join(dir, "pgid")); err == nil {
			if pgid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pgid > 1 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
	})
	start := time.Now()
	d, err := New(config.Hooks{PreCompact: []config.Hook{hook(cmd)}}, dir).PreCompact(context.Background(), PreCompactInput{Trigger: Auto})
	if elapsed := time.Since(start); elapsed > waitDelay+5*time.Second {
		t.Errorf("took %v", elapsed)
	}
	if !d.Block || d.Reason != "left a child" || err != nil {
		t.Errorf("PreCompact = %+v, %v", d, err)
	}
}
