package telegram

import (
	"context"
	"math"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// BenchmarkHundredChats sends one message in each of 100 Telegram chats at
// once, with an instant model and the production pacing (one send a second
// per chat, 25 a second in all) against a fake enforcing Telegram's limits.
// It reports the p99 time from the update being available to the chat's
// first visible text (an upper bound on pickup to first text), edits per
// reply and 429s.
func BenchmarkHundredChats(b *testing.B) {
	const n = 100
	fake := newFake(b, time.Second, 30)
	st := newStack(b, 0, func(c *config.Config) {
		for i := int64(0); i < n; i++ {
			c.Telegram.AllowedUsers = append(c.Telegram.AllowedUsers, 9000+i)
		}
	}, DefaultChatInterval, DefaultGlobalRate, fake)
	var lat []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		fake.mu.Lock()
		base := map[int64]int{}
		for i := int64(0); i < n; i++ {
			base[9000+i] = len(fake.sendsAt[9000+i])
		}
		fake.mu.Unlock()
		start := time.Now()
		for i := int64(0); i < n; i++ {
			fake.pushText(9000+i, 9000+i, "hello")
		}
		for i := int64(0); i < n; i++ {
			tg := 9000 + i
			fake.waitFor("first text", func() bool { return len(fake.sendsAt[tg]) > base[tg] })
			fake.mu.Lock()
			lat = append(lat, fake.sendsAt[tg][base[tg]].Sub(start))
			fake.mu.Unlock()
		}
		for i := int64(0); i < n; i++ {
			tg := 9000 + i
			fake.waitFor("final", func() bool {
				fake.mu.Unlock()
				defer fake.mu.Lock()
				chat := st.bot.currentChat(tg)
				return chat != "" && st.idle(nil, chat)
			})
		}
	}
	b.StopTimer()
	st.bot.Close()
	st.bot = nil
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fake.mu.Lock()
	edits := 0
	for _, e := range fake.edits {
		edits += e
	}
	n429 := fake.n429
	fake.mu.Unlock()
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-first-text-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-first-text-ms")
	b.ReportMetric(float64(edits)/float64(n*b.N), "edits/reply")
	b.ReportMetric(float64(n429), "429s")
}

// BenchmarkFiftyChatsFirstAndFinal: 50 Telegram chats write at once; each
// reply streams for about two seconds (the builtin model's long answer),
// so streaming edits compete with first texts for the bot's budget. The
// production pacing (one send a second per chat, 25 a second in all)
// against a fake Bot API enforcing Telegram's limits (one a second per
// chat, 30 a second per bot). It reports, from the updates being
// available: the p50 and p99 time to each chat's first visible text and
// to its final text in place, the most sends the fake accepted in any
// sliding second, and 429s. At 25/s the 50th first text cannot come
// before 2 s.
func BenchmarkFiftyChatsFirstAndFinal(b *testing.B) {
	const n = 50
	const base = 7000
	fake := newFake(b, time.Second, 30)
	st := newStack(b, 10*time.Millisecond, func(c *config.Config) {
		for i := int64(0); i < n; i++ {
			c.Telegram.AllowedUsers = append(c.Telegram.AllowedUsers, base+i)
		}
	}, DefaultChatInterval, DefaultGlobalRate, fake)
	var first, final []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		fake.mu.Lock()
		sends, msgs := map[int64]int{}, map[int64]int{}
		for i := int64(0); i < n; i++ {
			sends[base+i], msgs[base+i] = len(fake.sendsAt[base+i]), len(fake.msgs[base+i])
		}
		fake.mu.Unlock()
		start := time.Now()
		for i := int64(0); i < n; i++ {
			fake.pushText(base+i, base+i, "long please")
		}
		for i := int64(0); i < n; i++ {
			tg := base + i
			fake.waitFor("first text", func() bool { return len(fake.sendsAt[tg]) > sends[tg] })
			fake.mu.Lock()
			first = append(first, fake.sendsAt[tg][sends[tg]].Sub(start))
			fake.mu.Unlock()
		}
		for i := int64(0); i < n; i++ {
			tg := base + i
			want := ""
			fake.waitFor("final text", func() bool {
				if want == "" {
					fake.mu.Unlock()
					chat := st.bot.currentChat(tg)
					if chat != "" && st.idle(b, chat) {
						want, _ = visible(render(finalReply(b, st, chat)))
					}
					fake.mu.Lock()
				}
				return want != "" && len(fake.msgs[tg]) > msgs[tg] && fake.msgs[tg][len(fake.msgs[tg])-1].Text == want
			})
			fake.mu.Lock()
			final = append(final, fake.msgs[tg][len(fake.msgs[tg])-1].At.Sub(start))
			fake.mu.Unlock()
		}
	}
	b.StopTimer()
	st.bot.Close()
	st.bot = nil
	slices.Sort(first)
	slices.Sort(final)
	p := func(d []time.Duration, q float64) float64 {
		i := min(len(d)-1, max(0, int(math.Ceil(q*float64(len(d))))-1))
		return float64(d[i].Milliseconds())
	}
	b.ReportMetric(p(first, 0.50), "p50-first-text-ms")
	b.ReportMetric(p(first, 0.99), "p99-first-text-ms")
	b.ReportMetric(p(final, 0.50), "p50-final-text-ms")
	b.ReportMetric(p(final, 0.99), "p99-final-text-ms")
	b.ReportMetric(float64(fake.maxInWindow(time.Second)), "max-sends/sliding-s")
	fake.mu.Lock()
	b.ReportMetric(float64(fake.n429), "429s")
	fake.mu.Unlock()
}

// finalReply is the text of the chat's last finished reply.
func finalReply(tb testing.TB, st *stack, chat string) string {
	tb.Helper()
	got := make(chan *chats.Snapshot, 1)
	sub := &subFunc{f: func(d chats.Delivery) {
		if d.Snapshot != nil {
			select {
			case got <- d.Snapshot:
			default:
			}
		}
	}}
	if err := st.svc.Open(context.Background(), chat, nil, sub, ""); err != nil {
		tb.Fatal(err)
	}
	_ = st.svc.Unsubscribe(context.Background(), chat, sub)
	sn := <-got
	for i := len(sn.Messages) - 1; i >= 0; i-- {
		if m := sn.Messages[i]; m.Role == "assistant" && m.State == chats.MsgDone {
			return m.Text
		}
	}
	return ""
}

// BenchmarkFetchFile downloads a 16 MB document from the fake Bot API
// (getFile, then the file path) into the blob store, as a person's
// Telegram file is passed on. Its bytes per operation show the file is
// streamed, never held whole: they stay far below the file's size.
func BenchmarkFetchFile(b *testing.B) {
	st := newStackWith(b, stackOpts{delay: time.Millisecond})
	const size = 16 << 20
	data := make([]byte, size)
	copy(data, "%PDF-1.4\n")
	for i := 9; i < size; i++ {
		data[i] = byte(i * 7)
	}
	id := st.fake.addFile(data, 0)
	ref := fileRef{id: id, size: size, typ: "application/pdf", name: "big.pdf", what: "file"}
	sc, _ := st.bot.as(111)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, problem, err := st.bot.fetch(context.Background(), sc, ref)
		if err != nil || problem.text != "" || a.Size != size {
			b.Fatalf("fetch: %v %s %+v", err, problem.text, a)
		}
	}
}
