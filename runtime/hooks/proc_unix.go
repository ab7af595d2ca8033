//go:build unix

package hooks

import (
	"context"

	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// command runs a hook the way the shell tool runs its commands (package
// pgroup): in a process group of its own, so a timeout kills the shell and
// everything it started, and so does the gateway's death while the hook
// runs. Processes a hook leaves behind when it exits are the hook's: they
// are not killed.
func command(ctx context.Context, line string) *pgroup.Cmd {
	return pgroup.CommandContext(ctx, line)
}
