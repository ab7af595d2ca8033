package telegram

import (
	"sort"
	"testing"
	"time"

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
