// Package web holds Mirror's browser client: the chat page, its script and
// style sheet, and the login page, embedded with go:embed so the binary
// serves them with no network, CDN or build step.
//
// The client speaks the WebSocket protocol of docs/protocol.md at /ws on the
// page's own host. The files and the DOM contract that browser tests rely on
// are described at the top of static/app.js.
//
// Serving (done by package gateway):
//
//	GET /          Index(), after auth
//	GET /login     LoginPage(); a wrong token answers 401 with LoginPageWithError(msg)
//	GET /monitor   MonitorPage(), after auth: the breaker dashboard (it loads
//	               /static/style.css, /static/monitor.css, /static/monitor.js,
//	               which imports /static/dom.js, /static/charts.js and its vendored uPlot;
//	               its DOM contract is described at the top of static/monitor.js)
//	GET /static/*  the files of Static(), after auth (index.html loads /static/style.css,
//	               the highlight.js themes under /static/vendor/highlight/,
//	               /static/app.js and the client's modules it imports (state.js,
//	               socket.js, frames.js, reducer.js, actions.js, render.js,
//	               transcript.js, queue.js, panels.js, bindings.js, keys.js,
//	               nav.js, page.js: README.md, "Browser client layout"),
//	               /static/events.js, /static/markdown.js, /static/quota.js,
//	               /static/settings.js, /static/attach.js, /static/media.js, /static/chatlist.js,
//	               /static/chatmenu.js, /static/search.js, /static/dom.js (the
//	               helpers those modules import), /static/manage.css,
//	               /static/attention.js, /static/notify.js, /static/header-model.js,
//	               /static/attention.css,
//	               /static/favicon.svg, and /static/theme.js, which the
//	               Monitor loads too)
//
// StaticHandler serves those files gzipped to a browser that accepts it
// (compressed once per process) with an ETag, so a reload revalidates.
//
// static/vendor/ holds the browser libraries (marked, DOMPurify,
// highlight.js, uPlot) with their licenses, copied there at pinned versions
// by vendor.sh, which is run by hand; nothing is fetched at build or run
// time.
//
// The login page is self-contained (inline style, inline icon), so it renders
// even when /static is behind auth.
package web

import (
	"bytes"
	"embed"
	"html"
	"io/fs"
)

//go:embed static
var files embed.FS

var (
	static      fs.FS
	indexHTML   []byte
	loginHTML   []byte
	monitorHTML []byte
)

// errorMarker is where LoginPageWithError puts its message in login.html.
const errorMarker = "<!--mirror:error-->"

func init() {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic("web: " + err.Error())
	}
	static = sub
	indexHTML = mustRead("index.html")
	loginHTML = mustRead("login.html")
	monitorHTML = mustRead("monitor.html")
	if !bytes.Contains(loginHTML, []byte(errorMarker)) {
		panic("web: login.html has no " + errorMarker)
	}
}

func mustRead(name string) []byte {
	b, err := fs.ReadFile(static, name)
	if err != nil {
		panic("web: " + err.Error())
	}
	return b
}

// Static returns the embedded static files (index.html, app.js, markdown.js,
// quota.js, settings.js,
// monitor.html, monitor.js, monitor.css,
// style.css, favicon.svg, login.html) at the root of the returned FS, ready for
// http.FileServerFS under /static/.
func Static() fs.FS { return static }

// Index returns the chat page (a copy the caller may keep).
func Index() []byte { return bytes.Clone(indexHTML) }

// MonitorPage returns the breaker dashboard (a copy the caller may keep).
func MonitorPage() []byte { return bytes.Clone(monitorHTML) }

// LoginPage returns the login page: a form that POSTs field "token" to /login.
func LoginPage() []byte { return LoginPageWithError("") }

// LoginPageWithError returns the login page showing msg (HTML-escaped) as an
// error above the button, e.g. "That token is not right." for a 401. An empty
// msg gives the plain page.
func LoginPageWithError(msg string) []byte {
	if msg == "" {
		return bytes.Clone(loginHTML)
	}
	p := `<p class="error" id="login-error" role="alert">` + html.EscapeString(msg) + `</p>`
	return bytes.Replace(loginHTML, []byte(errorMarker), []byte(p), 1)
}
