package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/telegram"
)

// pairUsage is the help of `mirror pair`.
const pairUsage = `usage:
  mirror pair list [--config FILE] [--data DIR]
  mirror pair approve CODE [--person NAME] [--config FILE] [--data DIR]`

// pair runs `mirror pair list|approve CODE`. A running gateway holds the
// database's lock, so it is asked over HTTP (the listen address, with the
// access token); only when no gateway answers is the database opened here.
func pair(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return usageError{errors.New(pairUsage)}
	}
	sub, rest := args[0], args[1:]
	if sub == "-h" || sub == "--help" || sub == "help" {
		return helpShown{pairUsage + "\n"}
	}
	var (
		c      common
		code   string
		person string
		err    error
	)
	f := flag.NewFlagSet("pair "+sub, flag.ContinueOnError)
	c.register(f)
	switch sub {
	case "list":
		err = parseFlags(f, rest)
	case "approve":
		f.StringVar(&person, "person", "", "link the Telegram user to this person (created as a member when new); default a new member tg-USER")
		code, err = parseWithArg(f, rest, "CODE", "the pairing code the person was given")
	default:
		return usageError{fmt.Errorf("pair: unknown subcommand %q\n\n%s", sub, pairUsage)}
	}
	if err != nil {
		return err
	}
	cfg, err := c.loadClient()
	if err != nil {
		return err
	}
	dir, tok, err := tokenIn(cfg, getenv)
	if err != nil {
		return err
	}
	out, err := pairOverHTTP(ctx, cfg, tok, sub, code, person)
	if errors.Is(err, errNoGateway) {
		out, err = pairInDB(filepath.Join(dir, DBFile), sub, code, person)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, out)
	return nil
}

var errNoGateway = errors.New("no gateway answers")

// errHeldNoGateway is what a subcommand that has no fallback says when the
// database is locked yet no gateway answers at the listen address.
const errHeldNoGateway = "the database is held by another process, and no gateway answers at %s"

// ListenFile, in the data dir, holds the address a running gateway listens
// on (written once it accepts connections, removed when it stops).
const ListenFile = "listen"

// writeListenFile writes addr to dir's ListenFile, whole or not at all.
func writeListenFile(dir, addr string) error {
	tmp := filepath.Join(dir, ListenFile+".tmp")
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ListenFile))
}

// runningListen is the address the gateway using cfg's data dir wrote
// there, or cfg's listen address when there is none.
func runningListen(cfg *config.Config) string {
	if b, err := os.ReadFile(filepath.Join(cfg.DataPath(), ListenFile)); err == nil {
		if a := strings.TrimSpace(string(b)); a != "" {
			return a
		}
	}
	return cfg.Listen
}

// gatewayURL is where the gateway of cfg answers: its listen address, on
// loopback when it listens on every address.
func gatewayURL(cfg *config.Config) (string, error) {
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "", usageError{fmt.Errorf("listen %q: %w", cfg.Listen, err)}
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // a wildcard listener answers on loopback
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// errRefused is what callGateway says when the gateway answers 401.
const errRefused = "the gateway at %s refused the access token (is it another instance, with another data dir?)"

// callGateway sends one request to the running gateway at root with the
// access token (body, when not nil, as JSON), so that every subcommand that
// talks to a running gateway asks and fails alike: errNoGateway when nothing
// listens, the refusal when it answers 401; any other answer is the
// caller's, to read and close. where names the gateway in errors.
func callGateway(ctx context.Context, client *http.Client, where, root, tok, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, root+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoGateway
		}
		return nil, fmt.Errorf("ask the gateway at %s: %w", where, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close()
		return nil, fmt.Errorf(errRefused, where)
	}
	return resp, nil
}

// pairOverHTTP asks the running gateway; errNoGateway when none listens.
func pairOverHTTP(ctx context.Context, cfg *config.Config, tok, sub, code, person string) (string, error) {
	root, err := gatewayURL(cfg)
	if err != nil {
		return "", err
	}
	method, path := http.MethodGet, "/api/telegram/pairing"
	if sub == "approve" {
		method, path = http.MethodPost, path+"/"+url.PathEscape(code)+"/approve"
		if person != "" {
			path += "?person=" + url.QueryEscape(person)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := callGateway(ctx, http.DefaultClient, cfg.Listen, root, tok, method, path, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Pairings []telegram.Pairing `json:"pairings"`
		Approved *telegram.Pairing  `json:"approved"`
		Error    string             `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
	switch {
	case resp.StatusCode == http.StatusNotFound && body.Error == "":
		return "", fmt.Errorf("the gateway at %s does not run Telegram (telegram.enabled is false there)", cfg.Listen)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("pair %s: %s", sub, body.Error)
	case body.Approved != nil:
		return describeApproved(*body.Approved), nil
	}
	return describePairings(body.Pairings), nil
}

func pairInDB(path, sub, code, person string) (string, error) {
	db, err := chats.OpenDB(path, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if sub == "approve" {
		p, err := telegram.ApprovePairing(db, code, person, time.Now())
		if err != nil {
			return "", err
		}
		return describeApproved(p), nil
	}
	list, err := telegram.ListPairings(db, time.Now())
	if err != nil {
		return "", err
	}
	return describePairings(list), nil
}

// describeApproved and describePairings print names through
// telegram.Printable: a stranger chooses their name, and whatever a
// gateway or an older database holds must not drive the terminal.
func describeApproved(p telegram.Pairing) string {
	if p.Person != "" {
		return fmt.Sprintf("approved: Telegram user %d %s has access now, as %s\n", p.User, telegram.Printable(p.Name), telegram.Printable(p.Person))
	}
	return fmt.Sprintf("approved: Telegram user %d %s has access now\n", p.User, telegram.Printable(p.Name))
}

func describePairings(list []telegram.Pairing) string {
	if len(list) == 0 {
		return "no pairing codes are waiting\n"
	}
	var b strings.Builder
	for _, p := range list {
		fmt.Fprintf(&b, "%s  user %d  %s  expires %s\n", telegram.Printable(p.Code), p.User, telegram.Printable(p.Name), p.ExpiresAt.Local().Format("15:04"))
	}
	return b.String()
}
