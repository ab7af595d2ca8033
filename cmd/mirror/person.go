package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/gateway/telegram"
)

// personUsage is the help of `mirror person`.
const personUsage = `usage:
  mirror person add NAME [--role owner|member] [--config FILE] [--data DIR]
  mirror person list [--config FILE] [--data DIR]
  mirror person link NAME TELEGRAM_ID [--config FILE] [--data DIR]
  mirror person revoke NAME [--config FILE] [--data DIR]`

// personArgs is what one `mirror person` asks.
type personArgs struct {
	sub, name, role string
	telegram        int64
}

// person runs `mirror person add|list|link|revoke`. Like `mirror pair`, a
// running gateway (which holds the database's lock) is asked over HTTP
// with the access token, the first owner's; only when none answers is the
// database opened here.
func person(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return usageError{errors.New(personUsage)}
	}
	a := personArgs{sub: args[0]}
	rest := args[1:]
	var c common
	f := flag.NewFlagSet("person "+a.sub, flag.ContinueOnError)
	c.register(f)
	var err error
	switch a.sub {
	case "list":
		err = parseFlags(f, rest)
	case "add":
		f.StringVar(&a.role, "role", people.RoleMember, "owner or member")
		a.name, err = parseWithArg(f, rest, "NAME", "the new person's name")
	case "revoke":
		a.name, err = parseWithArg(f, rest, "NAME", "the person to revoke")
	case "link":
		// NAME TELEGRAM_ID: two arguments, flags before, between or after.
		var pos []string
		f.SetOutput(io.Discard)
		for len(rest) > 0 && err == nil {
			if err = f.Parse(rest); err != nil {
				err = parseFlags(f, rest)
				break
			}
			if f.NArg() == 0 {
				break
			}
			pos, rest = append(pos, f.Arg(0)), f.Args()[1:]
		}
		if err == nil && len(pos) != 2 {
			err = usageError{fmt.Errorf("person link: want NAME TELEGRAM_ID\n\n%s", personUsage)}
		}
		if err == nil {
			a.name = pos[0]
			if a.telegram, err = strconv.ParseInt(pos[1], 10, 64); err != nil || a.telegram == 0 {
				err = usageError{fmt.Errorf("person link: TELEGRAM_ID %q is not a Telegram user id (a number)", pos[1])}
			}
		}
	default:
		return usageError{fmt.Errorf("person: unknown subcommand %q\n\n%s", a.sub, personUsage)}
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
	root, err := gatewayURL(cfg)
	if err != nil {
		return err
	}
	out, err := personOverHTTP(ctx, root, tok, a)
	if errors.Is(err, errNoGateway) {
		out, err = personInDB(filepath.Join(dir, DBFile), tok, a)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, out)
	return nil
}

// personAnswer is what the gateway's /api/people routes answer.
type personAnswer struct {
	People []people.Person `json:"people"`
	Person *people.Person  `json:"person"`
	Token  string          `json:"token"`
	Error  string          `json:"error"`
}

func personOverHTTP(ctx context.Context, root, tok string, a personArgs) (string, error) {
	method, u := http.MethodGet, "/api/people"
	var body any
	switch a.sub {
	case "add":
		method, body = http.MethodPost, map[string]string{"name": a.name, "role": a.role}
	case "link":
		method, u, body = http.MethodPost, u+"/"+url.PathEscape(a.name)+"/link", map[string]int64{"telegram": a.telegram}
	case "revoke":
		method, u = http.MethodPost, u+"/"+url.PathEscape(a.name)+"/revoke"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := callGateway(ctx, http.DefaultClient, root, root, tok, method, u, body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var ans personAnswer
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ans)
	switch {
	case resp.StatusCode >= 300:
		if ans.Error == "" {
			ans.Error = resp.Status
		}
		return "", fmt.Errorf("person %s: %s", a.sub, ans.Error)
	}
	return describePeople(a, ans), nil
}

func personInDB(path, tok string, a personArgs) (string, error) {
	if err := dbFileExists(path); err != nil {
		return "", err
	}
	db, err := chats.OpenDB(path, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer db.Close()
	reg, err := people.Open(db, tok)
	if err != nil {
		return "", err
	}
	var ans personAnswer
	var p people.Person
	switch a.sub {
	case "list":
		ans.People, err = reg.List()
	case "add":
		p, ans.Token, err = reg.Add(a.name, a.role)
	case "link":
		p, err = reg.Link(a.name, a.telegram)
	case "revoke":
		p, err = reg.Revoke(a.name)
	}
	if err != nil {
		return "", fmt.Errorf("person %s: %w", a.sub, err)
	}
	ans.Person = &p
	return describePeople(a, ans), nil
}

// describePeople prints an answer; names go through telegram.Printable,
// as whatever a database holds must not drive the terminal.
func describePeople(a personArgs, ans personAnswer) string {
	var b strings.Builder
	line := func(p people.Person) {
		tg := make([]string, 0, len(p.Telegram))
		for _, u := range p.Telegram {
			tg = append(tg, strconv.FormatInt(u, 10))
		}
		state := ""
		if p.Revoked {
			state = "  revoked"
		}
		if p.First {
			state += "  (the access token)"
		}
		fmt.Fprintf(&b, "%s  %s  tokens %d  telegram [%s]%s\n", telegram.Printable(p.Name), p.Role, p.Tokens, strings.Join(tg, " "), state)
	}
	switch a.sub {
	case "list":
		for _, p := range ans.People {
			line(p)
		}
	case "add":
		if ans.Person != nil {
			fmt.Fprintf(&b, "added %s (%s). Their access token, shown once (log in with it, or send it as Authorization: Bearer):\n", telegram.Printable(ans.Person.Name), ans.Person.Role)
		}
		b.WriteString(ans.Token + "\n")
	default:
		if ans.Person != nil {
			b.WriteString(a.sub + ": ")
			line(*ans.Person)
		}
	}
	return b.String()
}
