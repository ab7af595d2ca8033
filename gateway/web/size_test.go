package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

var (
	pageRef   = regexp.MustCompile(`(?i)<(?:link|script)\b[^>]*\s(?:href|src)="/static/([^"]+)"`)
	importRef = regexp.MustCompile(`(?m)^\s*import\b[^'"]*['"]\./([^'"]+)['"]`)
)

// pageAssets lists what a browser fetches for page: the page, the files it
// links, and the modules those import (relative imports, followed).
func pageAssets(t testing.TB, page string) []string {
	seen := map[string]bool{page: true}
	list := []string{page}
	var follow func(name string)
	follow = func(name string) {
		b, err := fs.ReadFile(Static(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		re := importRef
		if strings.HasSuffix(name, ".html") {
			re = pageRef
		}
		dir := ""
		if i := strings.LastIndex(name, "/"); i >= 0 {
			dir = name[:i+1]
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			ref := m[1]
			if re == importRef {
				ref = dir + ref
			}
			if !seen[ref] {
				seen[ref] = true
				list = append(list, ref)
				if strings.HasSuffix(ref, ".js") || strings.HasSuffix(ref, ".mjs") {
					follow(ref)
				}
			}
		}
	}
	follow(page)
	return list
}

// BenchmarkPageAssets reports, per page, the bytes of every static asset a
// browser fetches (raw-B) and gzipped at the default level (gzip-B), what
// a compressing proxy sends, and what StaticHandler sends a browser that
// accepts gzip (sent-B: its precompressed copies, best level; the page
// itself too, by WritePage). The figures
// are in docs/benchmarks.md.
func BenchmarkPageAssets(b *testing.B) {
	for _, page := range []string{"index.html", "monitor.html"} {
		b.Run(page, func(b *testing.B) {
			var raw, packed, sent int
			for b.Loop() {
				raw, packed, sent = 0, 0, 0
				for _, name := range pageAssets(b, page) {
					data, err := fs.ReadFile(Static(), name)
					if err != nil {
						b.Fatal(err)
					}
					var buf bytes.Buffer
					zw := gzip.NewWriter(&buf)
					_, _ = zw.Write(data)
					_ = zw.Close()
					raw += len(data)
					packed += buf.Len()
					if a := assets()[name]; a != nil && a.gzipped() != nil {
						sent += len(a.gzipped())
					} else {
						sent += len(data)
					}
				}
			}
			b.ReportMetric(float64(raw), "raw-B")
			b.ReportMetric(float64(packed), "gzip-B")
			b.ReportMetric(float64(sent), "sent-B")
		})
	}
}

// TestPageAssetsExist: everything the pages load, modules' imports
// included, is embedded.
func TestPageAssetsExist(t *testing.T) {
	for _, page := range []string{"index.html", "monitor.html"} {
		list := pageAssets(t, page)
		if len(list) < 4 {
			t.Errorf("%s loads only %v", page, list)
		}
	}
	if got := strings.Join(pageAssets(t, "monitor.html"), " "); !strings.Contains(got, "vendor/uplot/uPlot.esm.js") {
		t.Errorf("monitor.html does not reach uPlot: %s", got)
	}
	if got := strings.Join(pageAssets(t, "index.html"), " "); !strings.Contains(got, "vendor/dompurify/purify.es.mjs") {
		t.Errorf("index.html does not reach DOMPurify: %s", got)
	}
}
