package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// xssProbe is what every payload below would set if it ran.
const xssProbe = `window.__xss`

// TestBrowserMarkdownRendersSafely runs static/markdown.js (marked,
// DOMPurify and highlight.js, vendored) in Chromium on the chat page: the
// Markdown the replies use renders as before, and no payload runs script,
// keeps an event handler, a javascript: or data: URL, loads an image or
// leaves an SVG. Each case is rendered into the live document, so a handler
// that survived would fire.
func TestBrowserMarkdownRendersSafely(t *testing.T) {
	model := newHeldModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	ctx := browser(t)
	login(t, ctx, st)

	cases := []struct {
		name, src string
		// want is a page expression over el (the rendered container) that
		// must be true.
		want string
	}{
		{"bold italic code", "**b** *i* `c`", `el.querySelector('strong').textContent === 'b' && el.querySelector('em').textContent === 'i' && el.querySelector('p > code').textContent === 'c'`},
		{"line breaks kept", "one\ntwo", `el.querySelectorAll('p br').length === 1`},
		{"heading two levels down", "# Title", `el.querySelector('h3.md-h')?.textContent === 'Title'`},
		{"fenced code highlighted", "```go\nfunc main() {}\n```", `(() => { const c = el.querySelector('.code-block pre code[data-lang="go"]'); return !!c && c.textContent === 'func main() {}' && !!c.querySelector('span.hljs-keyword') && el.querySelector('.code-block .code-lang').textContent === 'go' && !!el.querySelector('.code-block button.copy') })()`},
		{"unclosed fence runs to the end", "```\nstill streaming", `el.querySelector('.code-block code')?.textContent === 'still streaming'`},
		{"unknown language is plain", "```nosuchlang\n<b>x</b>\n```", `el.querySelector('code').textContent === '<b>x</b>' && !el.querySelector('code b') && !el.querySelector('code span')`},
		{"table wrapped and aligned", "| a | b |\n|:-:|--:|\n| 1 | 2 |", `!!el.querySelector('.table-wrap > table') && el.querySelector('th').style.textAlign === 'center' && el.querySelectorAll('td')[1].style.textAlign === 'right' && !el.querySelector('[align]')`},
		{"lists", "- a\n- b\n\n3. c", `el.querySelectorAll('ul > li').length === 2 && el.querySelector('ol').start === 3`},
		{"http link opens safely", "[site](https://example.org/a)", `(() => { const a = el.querySelector('a'); return a.href === 'https://example.org/a' && a.target === '_blank' && a.rel === 'noopener noreferrer' })()`},
		{"bare url linked", "see https://example.org/x.", `el.querySelector('a')?.getAttribute('href') === 'https://example.org/x'`},
		{"mailto link", "[me](mailto:a@example.org)", `el.querySelector('a')?.getAttribute('href') === 'mailto:a@example.org'`},
		{"javascript link loses its href", "[click](javascript:window.__xss=1)", `!el.querySelector('a[href]') && el.textContent.includes('click')`},
		{"javascript link, encoded", "[click](jav&#x09;ascript:window.__xss=1)", `!el.querySelector('a[href]')`},
		{"javascript autolink", "<javascript:window.__xss=1>", `!el.querySelector('a[href]')`},
		{"data link", "[x](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9MTwvc2NyaXB0Pg==)", `!el.querySelector('a[href]')`},
		{"raw script shown as text", "<script>window.__xss=1</script>", `!el.querySelector('script') && el.textContent.includes('<script>')`},
		{"img onerror shown as text", `<img src=x onerror="window.__xss=1">`, `!el.querySelector('img') && el.textContent.includes('onerror')`},
		{"inline html onerror", `text <img src=x onerror=window.__xss=1> more`, `!el.querySelector('img, [onerror]')`},
		{"svg payload", `<svg onload="window.__xss=1"><script>window.__xss=1</script></svg>`, `!el.querySelector('svg, script, [onload]')`},
		{"svg in a data image", "![pic](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)", `!el.querySelector('img, a[href]') && el.textContent.includes('pic')`},
		{"remote image becomes a link", "![chart](https://example.org/c.png)", `!el.querySelector('img') && el.querySelector('a')?.getAttribute('href') === 'https://example.org/c.png'`},
		{"event attribute through a link title", `[x](https://example.org "a\" onmouseover=\"window.__xss=1")`, `!el.querySelector('[onmouseover]')`},
		{"html in code stays text", "`<img src=x onerror=window.__xss=1>`", `el.querySelector('code').textContent.startsWith('<img') && !el.querySelector('img')`},
		{"iframe and form", `<iframe src="/"></iframe><form action="/x"><input name=a></form>`, `!el.querySelector('iframe, form, input')`},
		{"task list boxes", "- [x] done\n- [ ] todo", `el.querySelectorAll('input[type=checkbox]').length === 2`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := json.Marshal(tc.src)
			expr := fmt.Sprintf(`(async () => {
				%s = 0;
				const { renderMarkdown } = await import('/static/markdown.js');
				const el = document.createElement('div');
				el.className = 'md';
				document.body.append(el);
				el.append(renderMarkdown(%s));
				for (const n of el.querySelectorAll('*')) n.dispatchEvent(new Event('mouseover'));
				await new Promise((r) => setTimeout(r, 0));
				const ok = %s;
				const bad = [...el.querySelectorAll('*')].some((n) => [...n.attributes].some((a) => /^on/i.test(a.name) || /^\s*(javascript|data|vbscript):/i.test(a.value)));
				const html = el.outerHTML;
				el.remove();
				return JSON.stringify({ ok: !!ok, bad, ran: %s === 1, html });
			})()`, xssProbe, src, tc.want, xssProbe)
			var res struct {
				OK   bool   `json:"ok"`
				Bad  bool   `json:"bad"`
				Ran  bool   `json:"ran"`
				HTML string `json:"html"`
			}
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(raw), &res); err != nil {
				t.Fatal(err)
			}
			if !res.OK || res.Bad || res.Ran {
				t.Errorf("%q rendered %s (check %v, unsafe attribute %v, script ran %v)", tc.src, res.HTML, res.OK, res.Bad, res.Ran)
			}
		})
	}

	// Mixed at random (a fixed seed, so a failure repeats): 2,000 texts
	// built from Markdown and attack fragments; none may leave a handler,
	// a script-capable URL, an image, an SVG, a frame or run.
	mixed, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		window.__xss = 0;
		const { renderMarkdown } = await import('/static/markdown.js');
		const parts = ['**', '*', '`+"`"+`', '`+"```"+`', '\n', '\n\n', '[', '](', ')', '<', '>', '"', "'", '![', 'javascript:', 'JaVaScRiPt:', 'data:text/html,', 'vbscript:',
			'<img src=x onerror=window.__xss=1>', '<svg onload=window.__xss=1>', '<script>window.__xss=1</script>', '<a href="javascript:window.__xss=1">', 'onmouseover=window.__xss=1',
			'<iframe src=/>', '&#106;avascript:', '| a | b |\n|---|---|\n', '- ', '1. ', '> ', '# ', 'https://example.org/', 'mailto:a@b', '&lt;', '<b>', '</b>', '<style>*{}</style>', '<math><mi>'];
		let seed = 42;
		const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
		const host = document.createElement('div');
		document.body.append(host);
		const bad = [];
		for (let i = 0; i < 2000 && bad.length < 3; i++) {
			let src = '';
			for (let k = 1 + rnd(12); k > 0; k--) src += parts[rnd(parts.length)];
			host.replaceChildren(renderMarkdown(src));
			for (const n of host.querySelectorAll('*')) n.dispatchEvent(new Event('mouseover'));
			const unsafe = host.querySelector('img, svg, math, script, style, iframe, object, embed, form') ||
				[...host.querySelectorAll('*')].find((n) => [...n.attributes].some((a) => /^on/i.test(a.name) || (a.name === 'href' && !/^(https?:|mailto:)/i.test(a.value))));
			if (unsafe) bad.push(JSON.stringify(src) + ' → ' + host.innerHTML);
		}
		await new Promise((r) => setTimeout(r, 0));
		host.remove();
		if (window.__xss === 1) bad.push('a payload ran');
		return bad.join('\n');
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if mixed != "" {
		t.Fatalf("unsafe output from mixed input:\n%s", mixed)
	}

	// The whole path: a reply carrying the payloads (the fake model echoes
	// the message) is shown by app.js through renderMarkdown, and nothing
	// in it runs.
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
	payload := "x <img src=x onerror=window.__xss=1> [a](javascript:window.__xss=1) <svg onload=window.__xss=1></svg>\n\n```js\nconst a = 1\n```\n"
	typeAndSend(t, ctx, payload)
	model.next(t)
	until(t, ctx, "reply shown", `[...document.querySelectorAll('.msg.assistant:not(.streaming) .md')].some(e => e.textContent.includes('— done.'))`)
	md := `[...document.querySelectorAll('.msg.assistant:not(.streaming) .md')].find(e => e.textContent.includes('— done.'))`
	if js[bool](t, ctx, md+`.querySelector('img, svg, [onerror], [onload], a[href^="javascript"]') !== null`) {
		t.Fatalf("unsafe markup in the reply: %s", js[string](t, ctx, md+`.outerHTML`))
	}
	if !js[bool](t, ctx, md+`.querySelector('.code-block code[data-lang="js"] .hljs-keyword') !== null`) {
		t.Fatalf("the reply's code is not highlighted: %s", js[string](t, ctx, md+`.outerHTML`))
	}
	if js[bool](t, ctx, `window.__xss === 1`) {
		t.Fatal("a payload ran")
	}
	if got := js[string](t, ctx, `getComputedStyle(document.querySelector('.hljs-keyword')).color`); strings.TrimSpace(got) == "" {
		t.Fatal("the highlight theme is not applied")
	}
	shot(t, ctx, "markdown")
}
