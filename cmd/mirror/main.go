// Command mirror is the Mirror chat-bot gateway: `mirror serve` runs it,
// `mirror token` prints the access token, `mirror version` says which build
// this is. It wires the packages together and owns the process lifetime.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes, as CONTRACT.md fixes them.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// helpShown is a subcommand's --help: its text goes to stdout, exit 0.
type helpShown struct{ text string }

func (h helpShown) Error() string { return h.text }

// usageError marks a bad command line or bad configuration (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

const usage = `mirror: a chat-bot gateway

usage:
  mirror serve [--config FILE] [--data DIR] [--addr HOST:PORT] [--cluster]
  mirror token [--config FILE] [--data DIR]
  mirror pair list [--config FILE] [--data DIR]
  mirror pair approve CODE [--config FILE] [--data DIR]
  mirror person add NAME [--role owner|member] | list | link NAME TELEGRAM_ID | revoke NAME
  mirror replay CHAT [--config FILE] [--data DIR]
  mirror check-compression FILE [--context-window N]
  mirror backup [--config FILE] [--data DIR] FILE
  mirror check [--config FILE] [--data DIR]
  mirror cluster status [--json] [--config FILE] [--data DIR]
  mirror version
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stdout, stderr, getenv)
	case "token":
		err = token(args[1:], stdout, getenv)
	case "pair":
		err = pair(ctx, args[1:], stdout, getenv)
	case "person":
		err = person(ctx, args[1:], stdout, getenv)
	case "replay":
		err = replay(ctx, args[1:], stdout, getenv)
	case "backup":
		err = backup(ctx, args[1:], stdout, getenv)
	case "check":
		err = checkDB(ctx, args[1:], stdout, getenv)
	case "cluster":
		err = clusterCmd(ctx, args[1:], stdout, getenv)
	case "check-compression":
		err = checkCompression(args[1:], stdout)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, versionLine())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = usageError{fmt.Errorf("unknown command %q\n\n%s", args[0], usage)}
	}
	if err == nil {
		return exitOK
	}
	var help helpShown
	if errors.As(err, &help) {
		fmt.Fprint(stdout, help.text)
		return exitOK
	}
	fmt.Fprintln(stderr, "mirror:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitRuntime
}

func versionLine() string {
	commit := "unknown"
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value
				if len(commit) > 12 {
					commit = commit[:12]
				}
			}
		}
	}
	return fmt.Sprintf("mirror %s (commit %s, %s)", version, commit, goVersion)
}
