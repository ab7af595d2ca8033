//go:build !unix

package hooks

import "os/exec"

// ownGroup does nothing where there are no process groups: a timeout kills
// the shell alone (exec's default), and waitDelay bounds the wait for pipes
// a child keeps open.
func ownGroup(cmd *exec.Cmd) {}
