//go:build unix

package tokens

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system), which
// a machine shared with other work does not inflate the way it inflates
// wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
