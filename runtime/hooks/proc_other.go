//go:build !unix

package hooks

import (
	"context"
	"os/exec"
)

// command runs the hook with /bin/sh where there are no process groups: a
// timeout kills the shell alone (exec's default), and waitDelay bounds the
// wait for pipes a child keeps open.
func command(ctx context.Context, line string) *exec.Cmd {
	return exec.CommandContext(ctx, "/bin/sh", "-c", line)
}
