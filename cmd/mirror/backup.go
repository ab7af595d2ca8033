package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// lockWait is how long backup and check wait for the database's lock
// before they take it that a gateway holds it and ask that gateway.
const lockWait = 500 * time.Millisecond

// backup runs `mirror backup [--data DIR] FILE`: a consistent copy of the
// database, made in a read transaction while the gateway may go on writing.
// A running gateway holds the database, so it is asked over HTTP (GET
// /api/backup, with the access token). Either way the copy is written to a
// temp file beside FILE, synced, checked with dbcheck, and only then renamed
// over FILE (0600): FILE is the old copy or a whole, sound new one.
func backup(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	var c common
	f := flag.NewFlagSet("backup", flag.ContinueOnError)
	c.register(f)
	file, err := parseWithArg(f, args, "FILE", "the file to write the copy to")
	if err != nil {
		return err
	}
	cfg, err := c.loadClient()
	if err != nil {
		return err
	}
	target, err := filepath.Abs(file)
	if err != nil {
		return usageError{err}
	}
	path := filepath.Join(cfg.DataPath(), DBFile)
	if err := dbFileExists(path); err != nil {
		return err
	}
	if same(target, path) {
		return usageError{fmt.Errorf("backup: %s is the database itself; name another file", file)}
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return usageError{fmt.Errorf("backup: %s is a directory; name a file in it", file)}
	}
	how := "read from " + path
	rep, err := writeCopy(target, func(w io.Writer) error { return copyLocal(path, w) })
	if errors.Is(err, bolterrors.ErrTimeout) {
		how = "from the gateway running at " + cfg.Listen
		rep, err = writeCopy(target, func(w io.Writer) error { return copyOverHTTP(ctx, cfg, getenv, w) })
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backup: wrote %s (%d bytes, %s), %s; checked sound\n", target, rep.Size, rep.Summary(), how)
	return nil
}

// parseWithArg parses a subcommand's flags around its one argument (before
// or after the flags) and returns that argument.
func parseWithArg(f *flag.FlagSet, args []string, name, what string) (string, error) {
	arg, err := "", error(nil)
	f.SetOutput(io.Discard)
	if err = f.Parse(args); err != nil {
		err = parseFlags(f, args) // the help, or the usage error
	} else if f.NArg() == 0 {
		err = usageError{fmt.Errorf("%s: missing %s (%s)", f.Name(), name, what)}
	} else {
		arg = f.Arg(0)
		err = parseFlags(f, f.Args()[1:])
	}
	if h, ok := err.(helpShown); ok {
		err = helpShown{fmt.Sprintf("usage: mirror %s [flags] %s (%s)\n%s", f.Name(), name, what, h.text)}
	}
	return arg, err
}

// dbFileExists checks the database file with the data dir's trust rules.
func dbFileExists(path string) error {
	err := datadir.CheckFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s (has `mirror serve` run with this data dir?)", path)
	}
	return err
}

// same reports whether a and b name the same file (b exists).
func same(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// copyLocal writes a consistent copy of the database at path to w; bbolt's
// ErrTimeout when another process (a gateway) holds it.
func copyLocal(path string, w io.Writer) error {
	db, err := openChecked(path)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
}

// openChecked opens the database read-only after dbcheck found it sound,
// under the shared lock it took for the check.
func openChecked(path string) (*bolt.DB, error) {
	f, _, err := dbcheck.Open(path, os.O_RDONLY, 0, lockWait)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockWait,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s read-only: %w", path, err)
	}
	return db, nil
}

// writeCopy writes target through a synced temp file that fill writes and
// dbcheck finds sound, renamed over target; the temp file never stays.
func writeCopy(target string, fill func(io.Writer) error) (*dbcheck.Report, error) {
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*") // 0600
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := fill(tmp); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	rep := dbcheck.Check(tmp, fi.Size())
	if !rep.Sound() {
		return nil, fmt.Errorf("backup: the copy is not sound, so %s was not written: %s", target, strings.Join(rep.Problems, "; "))
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done = true
	// The rename is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return nil, fmt.Errorf("backup: sync %s: %w", dir, err)
		}
	}
	return rep, nil
}

// askGateway sends a GET with the access token to the gateway of cfg. A
// gateway that does not answer while another process holds the database
// is an error that says so.
func askGateway(ctx context.Context, cfg *config.Config, getenv func(string) string, path string) (*http.Response, error) {
	_, tok, err := tokenIn(cfg, getenv)
	if err != nil {
		return nil, err
	}
	root, err := gatewayURL(cfg)
	if err != nil {
		return nil, err
	}
	// No overall deadline (a big copy takes its time), but a gateway that
	// does not start answering is given up on.
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 30 * time.Second}}
	resp, err := callGateway(ctx, client, cfg.Listen, root, tok, http.MethodGet, path, nil)
	if errors.Is(err, errNoGateway) {
		return nil, fmt.Errorf(errHeldNoGateway, cfg.Listen)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("the gateway at %s has no %s (an older mirror? stop it, then run this again)", cfg.Listen, path)
	}
	return nil, fmt.Errorf("the gateway at %s answered %s: %s", cfg.Listen, resp.Status, body.Error)
}

func copyOverHTTP(ctx context.Context, cfg *config.Config, getenv func(string) string, w io.Writer) error {
	resp, err := askGateway(ctx, cfg, getenv, "/api/backup")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return fmt.Errorf("backup: the copy from the gateway at %s broke off after %d bytes: %w", cfg.Listen, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("backup: the gateway at %s sent %d of %d bytes", cfg.Listen, n, resp.ContentLength)
	}
	return nil
}
