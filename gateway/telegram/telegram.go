// Package telegram is Mirror's Telegram channel: a bot on the Bot API
// (github.com/go-telegram-bot-api/telegram-bot-api/v5) that lets allowed
// Telegram users talk to the same chats the browser shows.
//
// Updates arrive by long polling (our own loop around getUpdates, cancelled
// through the HTTP client's context) or by webhook. The offset of polling is
// committed to the database only after an update is handled durably, so a
// restart neither loses nor repeats one. Each Telegram chat has a current
// Mirror chat; a follower per (Telegram chat, Mirror chat) subscribes to the
// chat's events and streams replies as one Telegram message edited as text
// arrives, paced per chat and globally below Telegram's flood limits (the
// global budget holds in every sliding second, and each chat's first text
// goes before final texts, which go before streaming edits). What a
// follower has sent is persisted, so the final text of a reply lands exactly
// once across retries, 429s and restarts; its link to the chat is persisted
// before the chat accepts a message, and a turn resuming one cut off by a
// crash continues in the messages it had started. The Bot API has no
// idempotency key: a sendMessage whose answer is lost is sent once more at
// most (one duplicate), and a crash between a send and its record repeats
// that send once.
//
// In a group the bot answers only messages addressed to it (a mention of
// @botusername, /command@botusername, or a reply to one of its messages)
// by an allowed user; a group is one chat shared by its allowed members,
// and in a forum supergroup each topic is a chat of its own (a place:
// topics.go), running in parallel with the others, its replies, edits,
// typing and buttons sent into the topic.
//
// A message sent while a turn runs is acknowledged
// with Delete and Redirect buttons; chats has no way to change a pending
// message's mode, so Redirect deletes it and sends its text again as a
// redirect under a client id derived from the original (a repeated press
// makes no second message). Each Telegram message the bot passed on or
// sent maps to its Mirror message, so /pin as a reply names it.
//
// The bot token never appears in a log line or an error: every error of the
// library passes through redaction, and the library's logger is ours.
package telegram

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/limit"
	"github.com/mirror-gateway/mirror/monitor"
)

// Defaults of the pacing Options.
const (
	// DefaultChatInterval spaces the sends and edits of one Telegram chat:
	// Telegram asks for no more than one message a second per chat.
	DefaultChatInterval = time.Second
	// DefaultGlobalRate is how many Bot API sends a second the bot makes in
	// all, below Telegram's ~30/s.
	DefaultGlobalRate = 25
	// PairingTTL is how long a pairing code can be approved.
	PairingTTL = time.Hour
	// MaxMessage is the longest Telegram text (UTF-16 code units).
	MaxMessage = 4096
)

// Options configure a Bot.
type Options struct {
	// Config is the whole configuration: telegram.* and, for /status, the
	// chains.
	Config *config.Config
	// Token is the bot token (from the variable telegram.token_env names).
	Token string
	// WebhookSecret is the secret token of webhook mode; "" makes a random one.
	WebhookSecret string
	Chats         *chats.Service
	// Store is the chats' store; the bot keeps its own bucket in the same
	// database and commits through the store's group committer.
	Store *chats.Store
	// Monitor supplies the Telegram breaker; nil runs without one.
	Monitor *monitor.Monitor
	Metrics *monitor.Metrics
	Log     *slog.Logger
	// HTTPClient makes the Bot API requests; nil uses a plain http.Client.
	HTTPClient *http.Client
	// ChatInterval and GlobalRate override the pacing (tests shorten them).
	ChatInterval time.Duration
	GlobalRate   int
	// PollTimeout is the long-poll timeout (0: 50 s, Telegram's maximum).
	PollTimeout time.Duration
	// Now is the clock of pairing expiry (nil: time.Now).
	Now func() time.Time
	// Sends, when set, is the limit of limits.messages_per_minute the bot
	// spends from, keyed as rateKey says ("person:ID"); passing the
	// WebSocket's makes a person's browser and Telegram messages share one
	// allowance. nil: the bot keeps its own.
	Sends *limit.Keyed[string]
	// AlbumQuiet is how long an album gathers after its last part came
	// before it is passed on (0: DefaultAlbumQuiet).
	AlbumQuiet time.Duration
	// Leader and Offsets, both set in cluster mode (cluster.go): only the
	// node holding the leader lease receives updates, from the offset
	// every node reads. nil: single-node mode, the offset in the bot's
	// bucket, committed with what handling an update records.
	Leader  Leader
	Offsets Offsets
	// Replica, set with them, replicates the bot's bucket through the
	// cluster (replica.go): a new leader goes on with the old one's
	// state.
	Replica Replica
}

// Bot is the running Telegram channel.
type Bot struct {
	opt    Options
	cfg    config.Telegram
	api    *tgbotapi.BotAPI
	log    *slog.Logger
	svc    *chats.Service
	store  *chats.Store
	secret string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	global   *limiter
	pacersMu sync.Mutex
	pacers   map[int64]*pacer

	// pause waits between retries (sleep; tests put a fake clock here).
	pause func(ctx context.Context, d time.Duration) error
	// runCmd runs a chat's slash command (the chats service's Command;
	// tests wrap it to see the text handed over).
	runCmd func(ctx context.Context, chat, text string, o chats.Origin) (string, error)
	// afterLand, when set (tests), runs after a follower recorded a final
	// text and its message mapping.
	afterLand func()
	// afterSave, when set (tests), runs after a follower committed its state.
	afterSave func()

	mu        sync.Mutex
	followers map[followKey]*follower
	started   bool
	closed    bool

	sends *limit.Keyed[string] // limits.messages_per_minute per person (rateKey)

	// clk times the gathering of albums (tests put a manual clock here
	// before Start).
	clk clock
	// handleMu makes update handling and the passing on of albums one at
	// a time (polling handles one update at a time anyway).
	handleMu sync.Mutex
	// hookMu makes webhook updates (posted here or forwarded by another
	// node) one at a time, in order.
	hookMu sync.Mutex
	// stint is the leader's stint this node receives updates under, in
	// cluster mode (nil while it does not lead); under mu.
	stint context.Context
	// lead is the current stint's leader work (under mu), and claim the
	// position of its claim in the cluster's log (replica.go; atomic, as
	// a write may be made under mu).
	lead     *leadRun
	claim    atomic.Uint64
	groupsMu sync.Mutex
	groups   map[groupKey]*gathering

	// compactEvery, compactKick and compactAt: compacting the cluster's
	// log of the bucket (compact.go).
	compactEvery uint64
	compactKick  chan struct{}
	compactAt    atomic.Uint64
}

// New connects to the Bot API (the library calls getMe, so a wrong token or
// endpoint fails here) and prepares the bot; Start begins receiving.
func New(ctx context.Context, opt Options) (*Bot, error) {
	if opt.Config == nil || opt.Chats == nil || opt.Store == nil {
		return nil, errors.New("telegram: Config, Chats and Store are required")
	}
	if opt.Token == "" {
		return nil, fmt.Errorf("telegram: no bot token: set the variable %s", opt.Config.Telegram.TokenEnv)
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.ChatInterval <= 0 {
		opt.ChatInterval = DefaultChatInterval
	}
	if opt.GlobalRate <= 0 {
		opt.GlobalRate = DefaultGlobalRate
	}
	if opt.PollTimeout <= 0 {
		opt.PollTimeout = 50 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.HTTPClient == nil {
		opt.HTTPClient = &http.Client{}
	}
	if (opt.Leader == nil) != (opt.Offsets == nil) || (opt.Leader == nil) != (opt.Replica == nil) {
		return nil, errors.New("telegram: Leader, Offsets and Replica go together (cluster mode)")
	}
	if opt.WebhookSecret == "" && opt.Leader != nil {
		// Every node sets the webhook: the secret must be the same on all.
		opt.WebhookSecret = clusterSecret(opt.Token)
	}
	if opt.WebhookSecret == "" {
		var b [24]byte
		_, _ = rand.Read(b[:])
		opt.WebhookSecret = hex.EncodeToString(b[:])
	}
	registerSecret(opt.Token)
	setLogger(opt.Log)
	if err := initBucket(opt.Store); err != nil {
		return nil, err
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &Bot{opt: opt, cfg: opt.Config.Telegram, log: opt.Log, svc: opt.Chats, store: opt.Store,
		secret: opt.WebhookSecret, ctx: bctx, cancel: cancel,
		global: newLimiter(realClock{}, opt.GlobalRate, time.Second), pacers: map[int64]*pacer{},
		followers: map[followKey]*follower{}, pause: sleep, runCmd: opt.Chats.Command,
		clk: realClock{}, groups: map[groupKey]*gathering{},
		compactEvery: compactEvery, compactKick: make(chan struct{}, 1)}
	b.sends = opt.Sends
	if b.sends == nil {
		b.sends = limit.Messages(opt.Config.Limits.MessagesPerMinute)
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	api, err := tgbotapi.NewBotAPIWithClient(opt.Token, opt.Config.Telegram.APIEndpoint, ctxClient{ctx: cctx, c: opt.HTTPClient})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("telegram: connect (getMe): %w", redactErr(err))
	}
	b.api = api
	return b, nil
}

// Self is the bot's own user, from getMe.
func (b *Bot) Self() tgbotapi.User { return b.api.Self }

// Start re-opens the chats every Telegram chat followed (resuming after the
// last event handled), then receives updates: the polling loop, or in webhook
// mode setWebhook with the secret (mount WebhookHandler). Start returns once
// receiving has begun; Close stops it.
func (b *Bot) Start(ctx context.Context) error {
	b.mu.Lock()
	if b.started || b.closed {
		b.mu.Unlock()
		return errors.New("telegram: Start called twice or after Close")
	}
	b.started = true
	b.mu.Unlock()
	if b.opt.Leader == nil {
		// In cluster mode the followers and albums go on where the node
		// leads (beginLead), after catching up with the cluster's copy.
		states, err := loadFollows(b.store)
		if err != nil {
			return err
		}
		for _, st := range states {
			b.follow(place{st.TG, st.Thread}, st.Chat, &st)
		}
		b.resumeGroups()
	}
	if b.cfg.Mode == config.ModeWebhook {
		if err := b.setWebhook(ctx); err != nil {
			return err
		}
	}
	switch {
	case b.opt.Leader != nil:
		b.wg.Add(2)
		go b.followLog()
		go b.leadLoop()
	case b.cfg.Mode != config.ModeWebhook:
		b.wg.Add(1)
		go b.pollLoop()
	}
	return nil
}

// Close stops receiving, lets each follower finish the send it is making
// (so what was sent is recorded), unsubscribes them and returns when every
// goroutine of the bot has ended. Call it before closing the chats service.
func (b *Bot) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.stopGroups()
	b.wg.Wait()
}

// ctxClient injects a context into every request of the library, which has
// none of its own: cancelling it aborts a long poll at once.
type ctxClient struct {
	ctx context.Context
	c   *http.Client
	// wrote, when set, records that the whole request went on the wire:
	// a failure after that leaves unknown whether Telegram acted on it.
	wrote *atomic.Bool
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	ctx := c.ctx
	if c.wrote != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				c.wrote.Store(true)
			}
		}})
	}
	resp, err := c.c.Do(req.WithContext(ctx))
	return resp, redactErr(err)
}

// with returns a shallow copy of the API bound to ctx, so each call carries
// its own deadline and cancellation.
func (b *Bot) with(ctx context.Context) *tgbotapi.BotAPI { return b.withTrace(ctx, nil) }

// withTrace is with, recording in wrote whether a request was written.
func (b *Bot) withTrace(ctx context.Context, wrote *atomic.Bool) *tgbotapi.BotAPI {
	api := *b.api
	api.Client = ctxClient{ctx: ctx, c: b.opt.HTTPClient, wrote: wrote}
	return &api
}

// Secrets redaction. The library puts the token into URLs, so into every
// transport error, and its debug log; the set is package-wide because the
// library's logger is.
var (
	secretsMu sync.RWMutex
	secrets   = map[string]bool{}
)

func registerSecret(s string) {
	if s == "" {
		return
	}
	secretsMu.Lock()
	secrets[s] = true
	secretsMu.Unlock()
}

// Redact replaces every registered bot token in s.
func Redact(s string) string {
	secretsMu.RLock()
	defer secretsMu.RUnlock()
	for t := range secrets {
		s = strings.ReplaceAll(s, t, "<bot-token>")
	}
	return s
}

// redactedError hides the token in Error while keeping the chain, so
// errors.As still finds *tgbotapi.Error.
type redactedError struct{ err error }

func (e *redactedError) Error() string { return Redact(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

func redactErr(err error) error {
	if err == nil {
		return nil
	}
	var r *redactedError
	if errors.As(err, &r) {
		return err
	}
	return &redactedError{err}
}

type botLogger struct{ log *slog.Logger }

func (l botLogger) Println(v ...any) {
	l.log.Debug(Redact(strings.TrimSpace(fmt.Sprintln(v...))), "from", "telegram-bot-api")
}
func (l botLogger) Printf(format string, v ...any) {
	l.log.Debug(Redact(strings.TrimSpace(fmt.Sprintf(format, v...))), "from", "telegram-bot-api")
}

func setLogger(log *slog.Logger) { _ = tgbotapi.SetLogger(botLogger{log}) }

// pacer spaces events at least interval apart: strict spacing rather than a
// bucket, because Telegram answers bursts in one chat with 429.
type pacer struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newPacer(interval time.Duration) *pacer { return &pacer{interval: interval} }

// wait reserves the next slot and sleeps until it; a cancelled wait gives
// its slot back only when it was the last one reserved.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	slot := p.next
	if slot.Before(now) {
		slot = now
	}
	p.next = slot.Add(p.interval)
	p.mu.Unlock()
	d := time.Until(slot)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sent records that a send finished now: the next one waits a full
// interval from here, however long pacing or the network held this one.
func (p *pacer) sent(now time.Time) { p.delay(now.Add(p.interval)) }

// delay pushes the next slot to at least until (after a 429).
func (p *pacer) delay(until time.Time) {
	p.mu.Lock()
	if p.next.Before(until) {
		p.next = until
	}
	p.mu.Unlock()
}

// Priorities of the bot's sends, most urgent first: a reply's first text
// (and short answers: acknowledgements, command answers, button answers),
// then final texts, then what only shows progress (streaming edits, the
// typing action). Under load progress waits, so that every chat sees its
// first text as early as the budget allows.
const (
	prioFirst = iota
	prioFinal
	prioEdit
	numPrios
)

// clock is the limiter's time: the real one, or a test's.
type clock interface {
	Now() time.Time
	// AfterFunc calls f after d; stop cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// limiter holds the bot's sends to at most rate in every sliding window
// (Telegram's ~30 messages a second is per bot), as Telegram sees them: a
// send counts from when it is granted until a window after its answer
// came (Telegram received it somewhere in between), and a send is granted
// only while fewer than rate sends count. So no second, however it is
// placed and however the network delays requests, holds more than rate
// of them; a token bucket's burst, or spacing that network jitter
// squeezes together, could. Waiting sends are granted by priority, first
// come first served within one.
type limiter struct {
	clk    clock
	rate   int
	window time.Duration

	mu      sync.Mutex
	active  []*grant // granted sends that still count
	waiting [numPrios][]*grant
	timer   func() bool // stops the armed wake-up; nil when none
	wakeAt  time.Time
}

// grant is one send; ready is closed when it may go.
type grant struct {
	ready    chan struct{}
	granted  bool
	finished bool
	end      time.Time // when its answer came (finished)
}

func newLimiter(clk clock, rate int, window time.Duration) *limiter {
	return &limiter{clk: clk, rate: max(rate, 1), window: window}
}

// reserve queues a send of priority prio and grants what can go now.
func (l *limiter) reserve(prio int) *grant {
	g := &grant{ready: make(chan struct{})}
	p := min(max(prio, 0), numPrios-1)
	l.mu.Lock()
	l.waiting[p] = append(l.waiting[p], g)
	l.dispatchLocked()
	l.mu.Unlock()
	return g
}

// wait blocks until a send of priority prio may go, or ctx ends. The send
// must be finished once its answer came (or it was not made).
func (l *limiter) wait(ctx context.Context, prio int) (*grant, error) {
	g := l.reserve(prio)
	select {
	case <-g.ready:
		return g, nil
	case <-ctx.Done():
		l.mu.Lock()
		if g.granted {
			l.mu.Unlock()
			l.finish(g)
		} else {
			l.removeLocked(g)
			l.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// try grants a send at once when the budget has room and nothing waits,
// or returns nil: for what is worth sending only if it costs no one a wait.
func (l *limiter) try() *grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.waiting {
		if len(l.waiting[p]) > 0 {
			return nil
		}
	}
	g := &grant{ready: make(chan struct{})}
	l.waiting[numPrios-1] = append(l.waiting[numPrios-1], g)
	l.dispatchLocked()
	if !g.granted {
		l.removeLocked(g)
		return nil
	}
	return g
}

// finish records that a send's answer came now: it counts one more window.
func (l *limiter) finish(g *grant) {
	if g == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !g.granted || g.finished {
		return
	}
	g.finished, g.end = true, l.clk.Now()
	l.dispatchLocked()
}

func (l *limiter) removeLocked(g *grant) {
	for p := range l.waiting {
		for i, w := range l.waiting[p] {
			if w == g {
				l.waiting[p] = append(l.waiting[p][:i], l.waiting[p][i+1:]...)
				return
			}
		}
	}
}

// dispatchLocked grants waiting sends, most urgent first, while fewer than
// rate sends count, and arms a wake-up for when the next one stops
// counting (a send still waiting for its answer wakes it by finishing).
func (l *limiter) dispatchLocked() {
	now := l.clk.Now()
	keep := l.active[:0]
	var next time.Time // the earliest moment a finished send stops counting
	for _, g := range l.active {
		if g.finished && !now.Before(g.end.Add(l.window)) {
			continue
		}
		keep = append(keep, g)
		if g.finished && (next.IsZero() || g.end.Add(l.window).Before(next)) {
			next = g.end.Add(l.window)
		}
	}
	clear(l.active[len(keep):])
	l.active = keep
	for p := range l.waiting {
		for len(l.waiting[p]) > 0 {
			if len(l.active) >= l.rate {
				if !next.IsZero() {
					l.armLocked(next, now)
				}
				return
			}
			g := l.waiting[p][0]
			l.waiting[p] = l.waiting[p][1:]
			g.granted = true
			l.active = append(l.active, g)
			close(g.ready)
		}
	}
}

func (l *limiter) armLocked(at, now time.Time) {
	if l.timer != nil && l.wakeAt.Equal(at) {
		return
	}
	if l.timer != nil {
		l.timer()
	}
	l.wakeAt = at
	l.timer = l.clk.AfterFunc(at.Sub(now), func() {
		l.mu.Lock()
		l.timer = nil
		l.dispatchLocked()
		l.mu.Unlock()
	})
}

func (b *Bot) pacer(chat int64) *pacer {
	b.pacersMu.Lock()
	defer b.pacersMu.Unlock()
	p := b.pacers[chat]
	if p == nil {
		p = newPacer(b.opt.ChatInterval)
		b.pacers[chat] = p
	}
	return p
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
