package web

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

func readStatic(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(Static(), name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

// readClient returns the text of the chat page's client: app.js and every
// module it imports, transitively (what was one file is cut by concern).
func readClient(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, name := range clientModules(t) {
		b.WriteString(readStatic(t, name))
	}
	return b.String()
}

// clientModules lists app.js and the modules it reaches.
func clientModules(t *testing.T) []string {
	t.Helper()
	var list []string
	for _, name := range pageAssets(t, "app.js") {
		if strings.HasSuffix(name, ".js") && !strings.HasPrefix(name, "vendor/") {
			list = append(list, name)
		}
	}
	return list
}

func TestEmbeddedFiles(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "events.js", "markdown.js", "quota.js", "settings.js", "attach.js", "media.js", "dom.js", "chatmenu.js", "search.js", "style.css", "login.html", "favicon.svg", "charts.js"} {
		t.Run(name, func(t *testing.T) {
			if s := readStatic(t, name); len(strings.TrimSpace(s)) == 0 {
				t.Fatalf("%s is empty", name)
			}
		})
	}
	if !bytes.Equal(Index(), []byte(readStatic(t, "index.html"))) {
		t.Error("Index() differs from static/index.html")
	}
}

// nonFetching are URLs that name an XML namespace; nothing loads them.
var nonFetching = map[string]bool{
	"http://www.w3.org/2000/svg":   true,
	"http://www.w3.org/1999/xlink": true,
}

var absURL = regexp.MustCompile(`(?i)\b(?:https?|wss?|ftp)://[^\s"'<>()\\]*`)

func TestNoRemoteURLs(t *testing.T) {
	err := fs.WalkDir(Static(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The vendored libraries name URLs in comments, licenses and XML
		// namespaces; TestVendoredLibraries checks what they are instead.
		if d.IsDir() && path == "vendor" {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := fs.ReadFile(Static(), path)
		if err != nil {
			return err
		}
		for _, u := range absURL.FindAllString(string(b), -1) {
			if !nonFetching[strings.TrimRight(u, "/")] {
				t.Errorf("%s: remote URL %q (the client must work offline)", path, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var attrRef = regexp.MustCompile(`(?i)\s(?:src|href|action|poster|data)\s*=\s*["']([^"']*)["']`)

func TestPagesReferenceOnlyLocalAssets(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string // references the page must make
	}{
		{"index.html", []string{"/static/style.css", "/static/app.js", "/static/favicon.svg"}},
		{"login.html", []string{"/login"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := readStatic(t, tc.name)
			seen := map[string]bool{}
			for _, m := range attrRef.FindAllStringSubmatch(page, -1) {
				ref := m[1]
				seen[ref] = true
				switch {
				case strings.HasPrefix(ref, "//"):
					t.Errorf("protocol-relative reference %q", ref)
				case strings.HasPrefix(ref, "/"), strings.HasPrefix(ref, "#"):
				case strings.HasPrefix(ref, "data:"):
				default:
					t.Errorf("reference %q is not a local path", ref)
				}
			}
			for _, w := range tc.want {
				if !seen[w] {
					t.Errorf("%s does not reference %s", tc.name, w)
				}
			}
		})
	}
	// What index.html loads must exist in the embedded FS.
	page := readStatic(t, "index.html")
	for _, m := range attrRef.FindAllStringSubmatch(page, -1) {
		if name, ok := strings.CutPrefix(m[1], "/static/"); ok {
			if _, err := fs.Stat(Static(), name); err != nil {
				t.Errorf("index.html loads %s, which is not embedded", m[1])
			}
		}
	}
	// The modules import others relatively; they must exist too.
	for _, mod := range append(clientModules(t), "markdown.js") {
		for _, m := range regexp.MustCompile(`from\s+'\./([^']+)'`).FindAllStringSubmatch(readStatic(t, mod), -1) {
			if _, err := fs.Stat(Static(), m[1]); err != nil {
				t.Errorf("%s imports %s, which is not embedded", mod, m[1])
			}
		}
	}
}

func TestAppSpeaksProtocol(t *testing.T) {
	app := readClient(t)
	// Frames the client sends (docs/protocol.md, client → server).
	for _, typ := range []string{"hello", "chat.create", "chat.open", "chat.close", "message.send", "message.edit", "message.delete", "turn.stop"} {
		if !strings.Contains(app, "type: '"+typ+"'") {
			t.Errorf("app.js never sends %s", typ)
		}
	}
	// Frames it must understand (server → client).
	for _, typ := range []string{
		"welcome", "chat.created", "chat.updated", "chat.snapshot", "chat.resumed", "error",
		"message.accepted", "message.updated", "message.deleted", "message.picked",
		"turn.started", "reply.delta", "turn.finished", "turn.failed",
	} {
		if !strings.Contains(app, "'"+typ+"'") {
			t.Errorf("app.js does not handle %s", typ)
		}
	}
	for _, s := range []string{
		"client: 'mirror-web'", // hello
		"4401",                 // unauthorized close goes to /login
		"'/login'",
		"since: v.lastSeq", // resume by seq
		"client_id",
		"'in_use'",
		"Already in use",
		"location.hash",
	} {
		if !strings.Contains(app, s) {
			t.Errorf("app.js lacks %q", s)
		}
	}
}

func TestNoHTMLInjection(t *testing.T) {
	bad := regexp.MustCompile(`\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\(|new Function\(|createContextualFragment`)
	for _, name := range append(clientModules(t), "markdown.js", "quota.js", "settings.js", "charts.js", "monitor.js") {
		if loc := bad.FindStringIndex(readStatic(t, name)); loc != nil {
			t.Errorf("%s uses %q: render text with textContent and DOM nodes", name, readStatic(t, name)[loc[0]:loc[1]])
		}
	}
}

func TestDOMContract(t *testing.T) {
	page := readStatic(t, "index.html")
	for _, id := range []string{"chat-list", "new-chat", "messages", "composer", "input", "send", "stop", "status", "mode", "toasts"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("index.html has no #%s", id)
		}
	}
	if !regexp.MustCompile(`(?s)<form id="composer".*<textarea id="input"`).MatchString(page) {
		t.Error("#composer holds no textarea")
	}
	if !strings.Contains(page, `aria-live="polite"`) {
		t.Error("#messages is not aria-live")
	}
	if !strings.Contains(page, `type="module"`) {
		t.Error("app.js is not loaded as a module")
	}
	app := readClient(t)
	for _, c := range []string{"chat-item", "busy", "badge", "msg pending", "streaming", "notice in-use", "edit btn", "delete btn", "save btn", "stopped-mark"} {
		if !strings.Contains(app, c) {
			t.Errorf("app.js never renders %q", c)
		}
	}
}

func TestLoginPage(t *testing.T) {
	page := string(LoginPage())
	for _, s := range []string{`method="post"`, `action="/login"`, `name="token"`, `type="password"`, `<label for="token"`} {
		if !strings.Contains(page, s) {
			t.Errorf("login page lacks %s", s)
		}
	}
	if strings.Contains(page, `class="error"`) {
		t.Error("plain login page shows an error")
	}
	if strings.Contains(page, "/static/") {
		t.Error("login page loads /static assets, which may need auth")
	}
	bad := string(LoginPageWithError(`Wrong token <script>alert(1)</script>`))
	if !strings.Contains(bad, `role="alert">Wrong token &lt;script&gt;alert(1)&lt;/script&gt;</p>`) {
		t.Errorf("error not shown escaped:\n%s", bad)
	}
	if strings.Contains(bad, "<script>") {
		t.Error("error message not escaped")
	}
	// The returned pages are copies.
	LoginPage()[0] = 'X'
	Index()[0] = 'X'
	if LoginPage()[0] == 'X' || Index()[0] == 'X' {
		t.Error("pages share their backing array with callers")
	}
}

func FuzzLoginPageWithError(f *testing.F) {
	f.Add("That token is not right.")
	f.Add(`<img src=x onerror=alert(1)>`)
	f.Add("\"'&<>")
	f.Fuzz(func(t *testing.T, msg string) {
		page := string(LoginPageWithError(msg))
		if msg == "" {
			return
		}
		start := strings.Index(page, `role="alert">`)
		if start < 0 {
			t.Fatal("no error paragraph")
		}
		rest := page[start+len(`role="alert">`):]
		end := strings.Index(rest, "</p>")
		if end < 0 {
			t.Fatal("error paragraph not closed")
		}
		if strings.ContainsAny(rest[:end], "<>\"") {
			t.Fatalf("unescaped markup in %q", rest[:end])
		}
	})
}

func TestStaticServesModules(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/static/", http.FileServerFS(Static())))
	defer srv.Close()
	for path, ctype := range map[string]string{
		"/static/app.js":      "javascript",
		"/static/markdown.js": "javascript",
		// DOMPurify's ES build ends in .mjs; a module needs a JavaScript type.
		"/static/vendor/dompurify/purify.es.mjs":      "javascript",
		"/static/vendor/marked/marked.esm.js":         "javascript",
		"/static/vendor/highlight/a11y-light.min.css": "text/css",
		"/static/style.css":                           "text/css",
		"/static/favicon.svg":                         "image/svg+xml",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
		}
		// Browsers refuse module scripts served without a JavaScript type.
		if got := resp.Header.Get("Content-Type"); !strings.Contains(got, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, got, ctype)
		}
	}
}

// TestVendoredLibraries: each vendored library sits in static/vendor/ with
// its license, as vendor.sh put it there at the version it pins, and the
// test-only axe-core is not embedded (so not served).
func TestVendoredLibraries(t *testing.T) {
	versions := readStatic(t, "vendor/VERSIONS")
	script, err := os.ReadFile("vendor.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range []struct{ dir, pkg string }{
		{"marked", "marked@"}, {"dompurify", "dompurify@"}, {"highlight", "@highlightjs/cdn-assets@"}, {"uplot", "uplot@"},
	} {
		if !strings.Contains(readStatic(t, "vendor/"+lib.dir+"/LICENSE"), "ermission") {
			t.Errorf("vendor/%s/LICENSE does not read like a license", lib.dir)
		}
		i := strings.Index(versions, lib.pkg)
		if i < 0 {
			t.Errorf("VERSIONS does not pin %s", lib.pkg)
			continue
		}
		line, _, _ := strings.Cut(versions[i:], "\n")
		if !strings.Contains(string(script), `"`+line+`"`) {
			t.Errorf("VERSIONS says %q, which vendor.sh does not pin: rerun vendor.sh", line)
		}
	}
	if _, err := fs.Stat(Static(), "vendor/axe"); err == nil {
		t.Error("axe-core is embedded; it is for the tests only")
	}
	if _, err := os.Stat("testdata/axe/axe.min.js"); err != nil {
		t.Errorf("axe-core for the tests: %v", err)
	}
}
