package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
)

const testToken = "test-token-0123456789abcdef"

func tokenEnv(k string) string {
	if k == "MIRROR_TOKEN" {
		return testToken
	}
	return ""
}

// talkChats talks to a running gateway: n chats, the first with enough
// messages that its record needs branch pages. It returns the chat ids.
func talkChats(t *testing.T, addr string, n, messages int) []string {
	t.Helper()
	ws := dialWS(t, addr)
	var ids []string
	for i := range n {
		ws.send(map[string]any{"type": "chat.create", "title": fmt.Sprintf("chat %d", i)})
		id := ws.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
		ids = append(ids, id)
		ws.send(map[string]any{"type": "chat.open", "chat": id})
		ws.next("chat.snapshot", nil)
		count := 1
		if i == 0 {
			count = messages
		}
		for m := range count {
			text := fmt.Sprintf("message %d: %s", m, strings.Repeat("words to keep ", 40))
			ws.send(map[string]any{"type": "message.send", "chat": id, "text": text, "client_id": fmt.Sprintf("%s-%d", id, m)})
			ws.next("turn.finished", nil)
		}
	}
	slices.Sort(ids)
	return ids
}

// quickConfig writes a runtime.yaml listening on addr whose builtin model
// answers at once, and returns its path.
func quickConfig(t *testing.T, addr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runtime.yaml")
	if err := os.WriteFile(path, []byte("listen: "+addr+"\nproviders: [{name: builtin, kind: builtin, delay: 0s}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// listChats returns the chat ids a gateway lists, sorted.
func listChats(t *testing.T, addr string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/chats", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Chats []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Chats {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return ids
}

// chatsIn returns the chat ids a database file holds, read with bbolt.
func chatsIn(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []string
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("chats")).ForEach(func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	slices.Sort(ids)
	return ids
}

var (
	healthyOnce sync.Once
	healthyDB   []byte
	healthyIDs  []string
)

// healthy is a database made by the real gateway: chats with messages,
// written by a `mirror serve` process and closed with SIGTERM.
func healthy(t *testing.T) ([]byte, []string) {
	healthyOnce.Do(func() {
		data := filepath.Join(t.TempDir(), "data")
		p := startProc(t, []string{"serve", "--config", quickConfig(t, "127.0.0.1:0"), "--data", data})
		healthyIDs = talkChats(t, p.addr, 3, 40)
		p.stop(t)
		b, err := os.ReadFile(filepath.Join(data, DBFile))
		if err != nil {
			t.Fatal(err)
		}
		healthyDB = b
	})
	if healthyDB == nil {
		t.Fatal("no healthy database")
	}
	return bytes.Clone(healthyDB), healthyIDs
}

// The file's layout, read as bbolt writes it (native byte order).
var ne = binary.NativeEndian

type layout struct{ b []byte }

func (l layout) ps() int            { return int(ne.Uint32(l.b[16+8:])) }
func (l layout) meta(i int) []byte  { return l.b[i*l.ps()+16:] }
func (l layout) page(id int) []byte { return l.b[id*l.ps() : (id+1)*l.ps()] }
func (l layout) pages() int         { return len(l.b) / l.ps() }

// newest is the meta page in use.
func (l layout) newest() int {
	if ne.Uint64(l.meta(1)[48:]) > ne.Uint64(l.meta(0)[48:]) {
		return 1
	}
	return 0
}

func (l layout) resum(i int) {
	m := l.meta(i)
	h := fnv.New64a()
	h.Write(m[:56])
	ne.PutUint64(m[56:], h.Sum64())
}

// forge sets a u64 meta field at off in the meta page in use, checksum fixed.
func (l layout) forge(off int, v uint64) {
	i := l.newest()
	ne.PutUint64(l.meta(i)[off:], v)
	l.resum(i)
}

// find returns a tree page with flags and at least two elements that the
// tree in use reaches: a freed page below the high-water mark may still
// look like one, but neither bbolt nor the check ever reads it, so
// damaging it would prove nothing (and which pages are free varies from
// one healthy database to the next).
func (l layout) find(flags uint16) int {
	live := l.reachable()
	hwm := int(ne.Uint64(l.meta(l.newest())[40:]))
	for id := hwm - 1; id >= 2; id-- {
		p := l.page(id)
		if live[id] && ne.Uint64(p) == uint64(id) && ne.Uint16(p[8:]) == flags && ne.Uint16(p[10:]) > 1 {
			return id
		}
	}
	return -1
}

// reachable is the set of tree pages the meta page in use reaches: the
// root bucket's tree and every nested bucket's, as bbolt lays them out.
func (l layout) reachable() map[int]bool {
	seen := map[int]bool{}
	var walk func(id int)
	leaf := func(p []byte) { // descend into the buckets a leaf holds
		for i := range int(ne.Uint16(p[10:])) {
			e := p[16+16*i:]
			if ne.Uint32(e[0:])&1 == 0 {
				continue
			}
			at := 16 + 16*i + int(ne.Uint32(e[4:])) + int(ne.Uint32(e[8:]))
			if at+16 > len(p) {
				continue
			}
			// Root 0 is an inline bucket: it holds no pages (and, as bbolt
			// inlines only buckets without buckets, no nested ones).
			if root := ne.Uint64(p[at:]); root != 0 {
				walk(int(root))
			}
		}
	}
	walk = func(id int) {
		if id < 2 || seen[id] || (id+1)*l.ps() > len(l.b) {
			return
		}
		seen[id] = true
		end := min((id+1+int(ne.Uint32(l.page(id)[12:])))*l.ps(), len(l.b))
		p := l.b[id*l.ps() : end]
		switch ne.Uint16(p[8:]) {
		case 0x01:
			for i := range int(ne.Uint16(p[10:])) {
				walk(int(ne.Uint64(p[16+16*i+8:])))
			}
		case 0x02:
			leaf(p)
		}
	}
	walk(int(ne.Uint64(l.meta(l.newest())[16:])))
	return seen
}

// inline returns the bytes of an inline bucket's page (the value of a leaf
// element flagged as a bucket with root 0).
func (l layout) inline() []byte {
	hwm := int(ne.Uint64(l.meta(l.newest())[40:]))
	for id := 2; id < hwm; id++ {
		p := l.page(id)
		if ne.Uint64(p) != uint64(id) || ne.Uint16(p[8:]) != 0x02 || ne.Uint32(p[12:]) != 0 {
			continue
		}
		for i := range int(ne.Uint16(p[10:])) {
			e := p[16+16*i:]
			at := 16 + 16*i + int(ne.Uint32(e[4:])) + int(ne.Uint32(e[8:]))
			if ne.Uint32(e[0:])&1 == 1 && at+32 <= len(p) && ne.Uint64(p[at:]) == 0 {
				return p[at+16:]
			}
		}
	}
	return nil
}

func scramble(p []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
}

// damages are the ways a database file was found broken; each must be
// refused by `mirror serve` with exit 1 and named by `mirror check`.
var damages = []struct {
	name   string
	damage func(l layout) []byte
}{
	// Half of what the database uses (its high-water mark): bbolt grows
	// the file ahead of use, so half of the file may cut only unused pages.
	{"truncated to half", func(l layout) []byte { return l.b[:int(ne.Uint64(l.meta(l.newest())[40:]))*l.ps()/2] }},
	{"shorter than a page", func(l layout) []byte { return l.b[:100] }},
	{"only the first page left", func(l layout) []byte { return l.b[:l.ps()] }},
	{"a file of zeros", func(l layout) []byte { return make([]byte, len(l.b)) }},
	{"both meta pages zeroed", func(l layout) []byte { clear(l.b[:2*l.ps()]); return l.b }},
	{"bad magic", func(l layout) []byte { l.meta(0)[0] ^= 0xff; l.meta(1)[0] ^= 0xff; return l.b }},
	{"bad version", func(l layout) []byte {
		for i := range 2 {
			ne.PutUint32(l.meta(i)[4:], 3)
			l.resum(i)
		}
		return l.b
	}},
	{"bad checksums", func(l layout) []byte { l.meta(0)[50] ^= 1; l.meta(1)[50] ^= 1; return l.b }},
	{"wrong page size", func(l layout) []byte {
		i := l.newest()
		ne.PutUint32(l.meta(i)[8:], uint32(l.ps()*2))
		l.resum(i)
		return l.b
	}},
	{"high-water mark past the end", func(l layout) []byte { l.forge(40, uint64(l.pages()+100)); return l.b }},
	{"root at a meta page", func(l layout) []byte { l.forge(16, 1); return l.b }},
	{"freelist at a leaf page", func(l layout) []byte { l.forge(32, uint64(l.find(0x02))); return l.b }},
	{"root page of random bytes", func(l layout) []byte {
		scramble(l.page(int(ne.Uint64(l.meta(l.newest())[16:]))), 1)
		return l.b
	}},
	{"branch page of random bytes", func(l layout) []byte { scramble(l.page(l.find(0x01)), 2); return l.b }},
	{"leaf page of random bytes", func(l layout) []byte { scramble(l.page(l.find(0x02)), 3); return l.b }},
	{"leaf element past its page", func(l layout) []byte { ne.PutUint32(l.page(l.find(0x02))[16+16+4:], 1<<28); return l.b }},
	{"leaf keys out of order", func(l layout) []byte {
		p := l.page(l.find(0x02))
		e := p[16+16:]
		clear(p[16+16+int(ne.Uint32(e[4:])):][:ne.Uint32(e[8:])]) // key 1 = zeros, before key 0
		return l.b
	}},
	{"branch child past the end", func(l layout) []byte { ne.PutUint64(l.page(l.find(0x01))[16+8:], 1<<40); return l.b }},
	{"branch child is itself", func(l layout) []byte {
		id := l.find(0x01)
		ne.PutUint64(l.page(id)[16+8:], uint64(id))
		return l.b
	}},
	{"page header names another page", func(l layout) []byte { ne.PutUint64(l.page(l.find(0x02)), 7777); return l.b }},
	{"page runs past the end", func(l layout) []byte { ne.PutUint32(l.page(l.find(0x02))[12:], 1<<30); return l.b }},
	{"inline bucket's page damaged", func(l layout) []byte { ne.PutUint16(l.inline()[8:], 0x01); return l.b }},
}

// TestDamagedDatabase: for every kind of damage, `mirror serve` (a real
// process) exits 1 with a message that names the file, what is wrong and
// what to do, never a panic or a fault, and leaves the file byte for byte;
// `mirror check` exits 1 on each and 0 on the healthy file.
func TestDamagedDatabase(t *testing.T) {
	good, _ := healthy(t)
	l := layout{good}
	if l.find(0x01) < 0 || l.find(0x02) < 0 || l.inline() == nil {
		t.Fatal("the healthy database has no branch page, leaf page or inline bucket to damage")
	}
	setup := func(t *testing.T, b []byte) (data, path string) {
		data = filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(data, DBFile)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return data, path
	}
	t.Run("healthy", func(t *testing.T) {
		data, path := setup(t, good)
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"check", "--data", data}, &out, &errb, tokenEnv); code != 0 || !strings.Contains(out.String(), path+": sound") {
			t.Fatalf("check: exit %d %q %q", code, out.String(), errb.String())
		}
	})
	if len(damages) < 15 {
		t.Fatalf("%d kinds of damage", len(damages))
	}
	for i, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			b := d.damage(layout{bytes.Clone(good)})
			data, path := setup(t, b)
			before := sha256.Sum256(b)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--data", data, "--addr", "127.0.0.1:0")
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN="+testToken)
			out, err := cmd.CombinedOutput()
			msg := string(out)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("serve: %v (want exit 1)\n%s", err, msg)
			}
			for _, bad := range []string{"panic", "SIGSEGV", "SIGBUS", "goroutine ", "listening"} {
				if strings.Contains(msg, bad) {
					t.Fatalf("serve said %q:\n%s", bad, msg)
				}
			}
			for _, want := range []string{path, "is damaged", "mirror backup", "mirror check"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("serve did not say %q:\n%s", want, msg)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil || sha256.Sum256(after) != before {
				t.Fatalf("the file changed (%v)", err)
			}

			var cout, cerr bytes.Buffer
			code := run(context.Background(), []string{"check", "--data", data}, &cout, &cerr, tokenEnv)
			if code != 1 || !strings.Contains(cerr.String(), path) || !strings.Contains(cerr.String(), "  - ") {
				t.Fatalf("check: exit %d %q %q", code, cout.String(), cerr.String())
			}
			after, _ = os.ReadFile(path)
			if sha256.Sum256(after) != before {
				t.Fatal("check changed the file")
			}
			if i == 0 {
				t.Logf("serve says:\n%s", msg)
			}
		})
	}
}

// TestRecoverableDamage: what bbolt survives by design is not refused by
// serve. A torn newest meta page (a crash mid-commit) falls back to the
// previous transaction, and so does a zeroed first page, though bbolt's own
// tx.Check, which asserts on both meta pages' headers, makes `mirror check`
// call that one damaged; garbage past the last page is ignored.
func TestRecoverableDamage(t *testing.T) {
	good, ids := healthy(t)
	cases := []struct {
		name   string
		damage func(l layout) []byte
		note   bool
		check  int
	}{
		{"torn newest meta page", func(l layout) []byte { scramble(l.meta(l.newest())[24:64], 4); return l.b }, true, 0},
		{"first page zeroed", func(l layout) []byte { clear(l.b[:l.ps()]); return l.b }, true, 1},
		{"garbage after the end", func(l layout) []byte {
			tail := make([]byte, 3*l.ps())
			scramble(tail, 5)
			return append(l.b, tail...)
		}, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, DBFile), tc.damage(layout{bytes.Clone(good)}), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"check", "--data", data}, &out, &errb, tokenEnv)
			if code != tc.check || strings.Contains(out.String(), "note:") != tc.note {
				t.Fatalf("check: exit %d %q %q", code, out.String(), errb.String())
			}
			p := startServe(t, data)
			if got := listChats(t, p.addr); len(got) == 0 || len(got) > len(ids) {
				t.Fatalf("chats %v, want some of %v", got, ids)
			}
			p.stop(t)
		})
	}
}

// TestBackupAndCheck: `mirror backup` and `mirror check` while the gateway
// holds the database (over HTTP) and while it does not; each copy opens
// and holds the same chats, and a gateway started on a copy lists them.
func TestBackupAndCheck(t *testing.T) {
	dir := t.TempDir()
	cfgPath := quickConfig(t, freeAddr(t))
	data := filepath.Join(dir, "data")
	flags := []string{"--config", cfgPath, "--data", data}
	mirror := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb, tokenEnv)
		return code, out.String(), errb.String()
	}

	p := startProc(t, append([]string{"serve"}, flags...))
	ids := talkChats(t, p.addr, 3, 3)

	hot := filepath.Join(dir, "backups", "hot.db")
	if err := os.Mkdir(filepath.Dir(hot), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := mirror(append([]string{"backup"}, append(flags, hot)...)...)
	if code != 0 || !strings.Contains(out, "from the gateway running at") {
		t.Fatalf("backup over HTTP: exit %d %q %q", code, out, errs)
	}
	code, out, errs = mirror(append([]string{"check"}, flags...)...)
	if code != 0 || !strings.Contains(out, "sound, as checked by the gateway") {
		t.Fatalf("check over HTTP: exit %d %q %q", code, out, errs)
	}
	// The gateway keeps serving meanwhile, and the copy was its state.
	talkChats(t, p.addr, 1, 1)
	p.stop(t)
	if got := chatsIn(t, hot); !slices.Equal(got, ids) {
		t.Fatalf("hot copy holds %v, want %v", got, ids)
	}
	all := chatsIn(t, filepath.Join(data, DBFile))

	cold := filepath.Join(dir, "backups", "cold.db")
	if err := os.WriteFile(cold, []byte("an older copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = mirror("backup", cold, "--config", cfgPath, "--data", data) // FILE before the flags, over an old file
	if code != 0 || !strings.Contains(out, "read from "+filepath.Join(data, DBFile)) {
		t.Fatalf("backup: exit %d %q %q", code, out, errs)
	}
	code, out, errs = mirror(append([]string{"check"}, flags...)...)
	if code != 0 || !strings.Contains(out, "bbolt's own check") {
		t.Fatalf("check: exit %d %q %q", code, out, errs)
	}
	for path, want := range map[string][]string{hot: ids, cold: all} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", path, fi.Mode(), err)
		}
		b, _ := os.ReadFile(path)
		if rep := dbcheck.Check(bytes.NewReader(b), int64(len(b))); !rep.Sound() {
			t.Fatalf("%s: %v", path, rep.Problems)
		}
		if got := chatsIn(t, path); !slices.Equal(got, want) {
			t.Fatalf("%s holds %v, want %v", path, got, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "backups", ".*tmp*")); len(left) > 0 {
		t.Fatalf("temp files left: %v", left)
	}

	// A gateway started on the cold copy lists every chat.
	restored := filepath.Join(dir, "restored")
	if err := os.Mkdir(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cold)
	if err := os.WriteFile(filepath.Join(restored, DBFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, restored)
	if got := listChats(t, p.addr); !slices.Equal(got, all) {
		t.Fatalf("restored gateway lists %v, want %v", got, all)
	}
	p.stop(t)

	// Usage: the database itself, a directory, no FILE; --help exits 0.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{append([]string{"backup"}, append(flags, filepath.Join(data, DBFile))...), 2, "the database itself"},
		{append([]string{"backup"}, append(flags, dir)...), 2, "is a directory"},
		{append([]string{"backup"}, flags...), 2, "missing FILE"},
		{[]string{"backup", "--help"}, 0, "-data"},
		{[]string{"check", "--help"}, 0, "-data"},
		{[]string{"backup", hot, "-h"}, 0, "usage: mirror backup [flags] FILE"},
		{[]string{"serve", "--help"}, 0, "-addr"},
		{[]string{"token", "--help"}, 0, "-data"},
		{[]string{"check", "--data", filepath.Join(dir, "none")}, 1, "no database at"},
	} {
		code, out, errs := mirror(tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d (want %d) %q %q", tc.args, code, tc.code, out, errs)
		}
	}
}
