package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// checkDB runs `mirror check [--data DIR]`: read-only, it checks the
// database with dbcheck (what every open checks) and then with bbolt's own
// tx.Check, and exits 0 when sound, 1 when damaged, saying what is wrong.
// A running gateway holds the database, so it is asked instead (GET
// /api/check): it checks the tree of its current transaction the same way;
// bbolt's tx.Check is left out there, as it is not safe beside writers.
func checkDB(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	cfg, err := loadArgs("check", args)
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataPath(), DBFile)
	if err := dbFileExists(path); err != nil {
		return err
	}
	f, rep, err := dbcheck.Open(path, os.O_RDONLY, 0, lockWait)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return checkOverHTTP(ctx, cfg, path, stdout, getenv)
	}
	if rep != nil {
		notes(stdout, rep)
	}
	if err != nil {
		return err
	}
	if rep == nil {
		f.Close()
		fmt.Fprintf(stdout, "%s: empty, a new database that bbolt fills at the next start\n", path)
		return nil
	}
	var found []string
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockWait,
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return f, nil }})
	if err != nil {
		f.Close()
		return fmt.Errorf("open %s read-only: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			found = append(found, "bbolt's check: "+e.Error())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) > 0 {
		rep.Problems = found
		return &dbcheck.Damage{Path: path, Report: rep}
	}
	fmt.Fprintf(stdout, "%s: sound\n  %s\n  bbolt's own check (tx.Check) found nothing wrong either\n", path, rep.Summary())
	return nil
}

func notes(w io.Writer, rep *dbcheck.Report) {
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func checkOverHTTP(ctx context.Context, cfg *config.Config, path string, stdout io.Writer, getenv func(string) string) error {
	resp, err := askGateway(ctx, cfg, getenv, "/api/check")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var rep dbcheck.Report
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil {
		return fmt.Errorf("check: the gateway at %s sent no report: %w", cfg.Listen, err)
	}
	if !rep.Sound() {
		return &dbcheck.Damage{Path: path, Report: &rep, Held: true}
	}
	fmt.Fprintf(stdout, "%s: sound, as checked by the gateway running at %s\n  %s\n  (bbolt's own check needs the gateway stopped)\n",
		path, cfg.Listen, rep.Summary())
	return nil
}
