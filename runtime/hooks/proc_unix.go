//go:build unix

package hooks

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the hook in a process group of its own and makes a timeout
// kill that whole group: killing only /bin/sh would leave its children
// running, holding the output pipes and the resources they took.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
