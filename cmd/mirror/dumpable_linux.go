package main

import "golang.org/x/sys/unix"

// nonDumpable makes the gateway non-dumpable (PR_SET_DUMPABLE 0): its
// /proc/PID/environ, mem, maps and fds become root's, and no process of the
// same user may ptrace it. An approved shell runs as the gateway's user;
// this keeps the keys and tokens in the gateway's environment and memory
// out of its reach. Children get dumpable back at exec, which is fine: they
// are given no secrets.
func nonDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
