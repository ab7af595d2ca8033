package tokens

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestKnownAnswers(t *testing.T) {
	tests := []struct {
		enc  string
		text string
		want []int
	}{
		// OpenAI's reference answers (tiktoken README, deps.md).
		{CL100kBase, "tiktoken is great!", []int{83, 1609, 5963, 374, 2294, 0}},
		{O200kBase, "tiktoken is great!", []int{83, 8251, 2488, 382, 2212, 0}},
		{O200kBase, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.enc+"/"+tt.text, func(t *testing.T) {
			c := Get(tt.enc)
			if c == nil {
				t.Fatalf("Get(%q) = nil", tt.enc)
			}
			got := c.Encode(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
			if n := c.Count(tt.text); n != len(tt.want) {
				t.Fatalf("Count(%q) = %d, want %d", tt.text, n, len(tt.want))
			}
		})
	}
	if n := Count("tiktoken is great!"); n != 6 {
		t.Fatalf("Count = %d, want 6", n)
	}
	if Get("p50k_base") != nil {
		t.Fatal("Get(p50k_base) should be nil")
	}
}

func TestFor(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o", O200kBase},
		{"gpt-4o-mini-2024-07-18", O200kBase},
		{"chatgpt-4o-latest", O200kBase},
		{"gpt-4.1-nano", O200kBase},
		{"gpt-4.5-preview", O200kBase},
		{"gpt-5", O200kBase},
		{"gpt-5-mini", O200kBase},
		{"o1-preview", O200kBase},
		{"o3-mini", O200kBase},
		{"o4-mini", O200kBase},
		{"gpt-4", CL100kBase},
		{"gpt-4-turbo", CL100kBase},
		{"gpt-4-32k-0314", CL100kBase},
		{"GPT-3.5-Turbo", CL100kBase},
		{"gpt-35-turbo", CL100kBase}, // Azure spelling
		{"text-embedding-3-small", CL100kBase},
		{"text-embedding-ada-002", CL100kBase},
		{"openai/gpt-4", CL100kBase},
		{"openai/gpt-4o", O200kBase},
		{"llama3.2:3b", O200kBase},
		{"", O200kBase},
	}
	for _, tt := range tests {
		if got := For(tt.model).Encoding(); got != tt.want {
			t.Errorf("For(%q) = %s, want %s", tt.model, got, tt.want)
		}
	}
}

func TestSpecialTokensArePlainText(t *testing.T) {
	for _, enc := range []string{O200kBase, CL100kBase} {
		c := Get(enc)
		for _, text := range []string{"<|endoftext|>", "hi <|endoftext|> there <|fim_prefix|><|endofprompt|>"} {
			ids := c.Encode(text) // must not panic
			if len(ids) < 2 {
				t.Errorf("%s: %q encoded as %v; want plain-text tokens, not one special token", enc, text, ids)
			}
			if c.Count(text) != len(ids) {
				t.Errorf("%s: Count and Encode disagree on %q", enc, text)
			}
		}
	}
}

func TestOverhead(t *testing.T) {
	for _, tt := range []struct{ n, want int }{{0, 0}, {1, 6}, {3, 12}} {
		if got := Overhead(tt.n); got != tt.want {
			t.Errorf("Overhead(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestConcurrentCount(t *testing.T) {
	// Fresh counters so the first load itself is raced too.
	counters := []*Counter{{name: O200kBase}, {name: CL100kBase}}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	want := []int{o200k.Count(text), cl100k.Count(text)}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				k := (g + i) % 2
				if got := counters[k].Count(text); got != want[k] {
					errs <- counters[k].name
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: concurrent count differs", name)
	}
}

const childEnv = "MIRROR_TOKENS_OFFLINE_CHILD"

// TestOfflineLoad proves the encodings load without touching the network or
// the tiktoken cache: a fresh process (the test binary re-executed, so the
// process-global tiktoken state is new) loads both encodings with an empty
// cache dir and a dead proxy, and the cache dir must stay empty.
func TestOfflineLoad(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		for _, c := range []*Counter{o200k, cl100k} {
			if err := c.Load(); err != nil {
				t.Fatalf("load %s: %v", c.name, err)
			}
		}
		if n := cl100k.Count("tiktoken is great!"); n != 6 {
			t.Fatalf("cl100k count = %d", n)
		}
		if n := o200k.Count("tiktoken is great!"); n != 6 {
			t.Fatalf("o200k count = %d", n)
		}
		os.Stdout.WriteString("CHILD-LOADED-OK\n")
		return
	}

	// A port that was listening a moment ago and is now closed: any proxied
	// request fails fast instead of leaving the machine.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOfflineLoad$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		childEnv+"=1",
		"TIKTOKEN_CACHE_DIR="+cache,
		"DATA_GYM_CACHE_DIR="+cache,
		"HTTP_PROXY="+dead, "HTTPS_PROXY="+dead, "http_proxy="+dead, "https_proxy="+dead,
		"NO_PROXY=", "no_proxy=",
	)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CHILD-LOADED-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("tiktoken cache dir is not empty: %v", entries)
	}
}

// BenchmarkCount measures counting speed (MB/s): a short message, 2 KB of
// prose, and 256 KiB (the message size limit) of English prose, of one
// repeated letter and of random base64. The last two are the degenerate
// inputs whose count was quadratic; they must stay within 3x of prose.
// Besides MB/s of wall time it reports cpu-MB/s, per CPU second.
func BenchmarkCount(b *testing.B) {
	short := "Hi! Can you help me plan a trip to Lisbon next week?"
	long := strings.Repeat("Mirror keeps long conversations inside the model's budget without losing the thread. ", 25)[:2048]
	cases := []struct{ name, text string }{{"short", short}, {"2KB", long}}
	for _, name := range []string{"prose", "one-letter", "base64"} {
		cases = append(cases, struct{ name, text string }{"256KiB-" + name, benchText(b, name)})
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			if err := o200k.Load(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bc.text)))
			cpu := cpuTime()
			for b.Loop() {
				Count(bc.text)
			}
			// MB/s per CPU second too: on a busy machine wall time
			// varies with the neighbours, CPU time much less.
			if cpu, n := cpuTime()-cpu, b.N; cpu > 0 {
				b.ReportMetric(float64(len(bc.text))*float64(n)/cpu.Seconds()/1e6, "cpu-MB/s")
			}
		})
	}
}

func TestCachedCountsMatch(t *testing.T) {
	c := For("gpt-4o")
	texts := []string{"tiktoken is great!", "a second text", "tiktoken is great!"}
	for i := range 3 * cacheGeneration {
		texts = append(texts, "filler "+strings.Repeat("x", i%50)+string(rune('a'+i%26)))
	}
	for _, s := range texts {
		if got, want := c.Count(s), len(c.Encode(s)); got != want {
			t.Fatalf("Count(%q) = %d, want %d", s, got, want)
		}
	}
	for _, s := range texts[:3] { // again, from the cache or not: the same
		if got, want := c.Count(s), len(c.Encode(s)); got != want {
			t.Fatalf("again Count(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestWarm: warming loads each table and reads every page of it (a word
// of each page summed into touched), and counts stay what they were.
func TestWarm(t *testing.T) {
	for _, enc := range []string{O200kBase, CL100kBase} {
		c := Get(enc)
		before := touched.Load()
		if err := c.Warm(); err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if touched.Load() == before {
			t.Errorf("%s: Warm read nothing of the table", enc)
		}
		if got := c.Count("hello world"); got != 2 {
			t.Errorf("%s: Count(hello world) = %d after Warm; want 2", enc, got)
		}
	}
}
