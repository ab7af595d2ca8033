// Package cluster runs a Mirror gateway as one node of a cluster on NATS
// JetStream, and is the only package that imports NATS. It owns the
// embedded NATS server (or the connection to an external cluster), the
// replicated records stream, the leases bucket (the leader's lease, each
// chat's owner lease) and the nodes' heartbeats. It implements
// chats.RecordLog: a chat's appends are fenced by the chat subject's last
// sequence, so the store itself refuses a stale owner's write.
//
// Nothing here runs in single-node mode: cmd/mirror starts a Node only
// for `mirror serve --cluster` (or cluster.enabled).
package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"
)

// Names in NATS. The records stream holds every chat's record, one
// subject per chat; the two buckets hold leases and node heartbeats.
const (
	RecordsStream = "MIRROR_RECORDS"
	recordsPrefix = "mirror.rec."
	LeasesBucket  = "mirror_leases"
	NodesBucket   = "mirror_nodes"
	WorkBucket    = "mirror_work"
	leaderKey     = "leader"
	chatKeyPrefix = "chat."
	clusterName   = "mirror"
)

// Options configure a node.
type Options struct {
	// Name is the node's name, unique in the cluster.
	Name string
	// Listen is the embedded server's client address (host:port; port 0
	// picks a free one). Routes is its cluster routes address; Peers are
	// the other nodes' routes addresses.
	Listen, Routes string
	Peers          []string
	// StoreDir holds the embedded server's JetStream files.
	StoreDir string
	// NATSURL, when set, connects to an external NATS cluster instead of
	// embedding a server.
	NATSURL string
	// Replicas is how many servers keep the records and the leases (1, 3
	// or 5); 3 when 0.
	Replicas int
	// LeaseTTL is how long a lease lasts unless renewed; 5s when 0.
	LeaseTTL time.Duration
	// Secret, when set, is required of every route and client of the
	// embedded server (serve passes one derived from the access token,
	// which is the same on every node). Derive it with RouteSecret.
	Secret string
	// TLS, when set, is mutual TLS for the cluster's connections (see
	// config.ClusterTLSConfig): this node's certificate, and the CA pool
	// that every peer's must come from. The embedded server's routes, both
	// ways, and its client port then require it (a peer or client without
	// such a certificate is refused); with NATSURL the connection to the
	// external servers uses it. The node's own connection to its embedded
	// server is in-process, not over TCP.
	TLS *tls.Config
	// HTTP is this node's gateway address, shown by status.
	HTTP string
	// Log receives the node's and the embedded server's warnings.
	Log *slog.Logger
	// OnLost is called (on the keeper's goroutine) when a chat lease this
	// node held was lost; the chat's owner must stop its turn.
	OnLost func(chat string)
}

// Node is one running node: its NATS server (when embedded), its
// connection, and the goroutine that keeps its leases.
type Node struct {
	o   Options
	log *slog.Logger
	srv *server.Server // nil with an external NATS
	nc  *nats.Conn
	js  jetstream.JetStream

	ready    chan struct{} // closed when the stream and buckets exist
	setupErr error         // set before ready closes when setup gave up

	mu      sync.Mutex
	records jetstream.Stream
	leases  jetstream.KeyValue
	nodes   jetstream.KeyValue
	leader  *Lease            // this node's leader lease while it leads
	claims  map[string]*Claim // chat leases this node holds
	work    jetstream.KeyValue
	// telegram is the Telegram offset's bucket (tgoffset.go).
	telegram jetstream.KeyValue
	// tgState is the stream of the Telegram bot's bucket (tgstate.go).
	tgState jetstream.Stream
	// people is the stream of the people registry's writes (people.go).
	people jetstream.Stream

	// blobs and uploads are the shared attachments (blobs.go), bound on
	// first use under blobsMu.
	blobs   jetstream.ObjectStore
	uploads jetstream.KeyValue
	blobsMu sync.Mutex
	// hasWork is, by chat, whether the work index holds it as this node
	// last wrote it: Append writes the index only when that changes.
	hasWork map[string]bool
	started time.Time

	stop context.CancelFunc
	done chan struct{}

	// paused stops renewals and elections, as if the process were
	// stopped (SIGSTOP) while its server keeps running: tests use it to
	// let leases expire under a node that still believes it holds them.
	paused atomic.Bool
	// gets counts the record messages read one by one (records.go).
	gets atomic.Int64
	// renewals counts the chat-lease renewals sent (renewClaims).
	renewals atomic.Int64

	extra heartbeatExtra // status.go: what the heartbeat adds

	// onLeader are the functions OnLeader registered, by id; closing is
	// set once Close begins giving the leases up.
	onLeader map[int]func(leading bool)
	nextFn   int
	closing  atomic.Bool
	left     atomic.Bool // Leave ran
}

// Start starts the embedded server (unless Options.NATSURL is set),
// connects to it, and starts the keeper, which creates the stream and the
// buckets once enough servers are up (Ready), then runs the leader
// election and the node's heartbeat. Close stops it all.
func Start(ctx context.Context, o Options) (*Node, error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	n := &Node{o: o, log: o.Log, ready: make(chan struct{}), claims: map[string]*Claim{}, hasWork: map[string]bool{}, started: time.Now().UTC(), done: make(chan struct{})}
	opts := []nats.Option{nats.Name("mirror " + o.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	url := o.NATSURL
	if url != "" && o.TLS != nil {
		// The external servers must offer TLS, and verify this node's
		// certificate if they require one.
		opts = append(opts, nats.Secure(clientTLS(o.TLS)))
	}
	if url == "" {
		srv, err := embed(o)
		if err != nil {
			return nil, err
		}
		n.srv = srv
		opts = append(opts, nats.InProcessServer(srv))
		if o.Secret != "" {
			opts = append(opts, nats.UserInfo(routeUser, o.Secret))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		n.shutdownServer()
		return nil, fmt.Errorf("cluster: connect to NATS: %w", err)
	}
	n.nc = nc
	if n.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		n.shutdownServer()
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stop = cancel
	go n.keep(kctx)
	return n, nil
}

// maxFlushPayload is the embedded servers' largest message: the largest
// flush (NATS advises against more than 8 MiB).
const maxFlushPayload = 8 << 20

// routeUser is the user name of routes and clients when Options.Secret is set.
const routeUser = "mirror"

// RouteSecret derives the embedded servers' shared secret from the
// gateway's access token: the same on every node, and not the token
// itself, which routes without TLS would carry in clear.
func RouteSecret(token string) string {
	if token == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("mirror cluster routes v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// embed starts this node's NATS server: JetStream on, every write synced
// to disk (never the default sync interval, which can lose acknowledged
// writes at power loss), routes to the peers.
func embed(o Options) (*server.Server, error) {
	host, port, err := splitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen: %w", err)
	}
	sopts := &server.Options{
		ServerName: o.Name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		SyncAlways: true,
		NoSigs:     true,
		// One flush is one message: a long tool output or a boundary's
		// archive rides in it, past the default 1 MiB.
		MaxPayload: maxFlushPayload,
	}
	if o.Secret != "" {
		// Clients' password kept as a bcrypt hash (the server warns about
		// plain ones); the cheapest cost will do for a 256-bit secret.
		h, err := bcrypt.GenerateFromPassword([]byte(o.Secret), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		sopts.Username, sopts.Password = routeUser, string(h)
	}
	if o.TLS != nil {
		// TCP clients: TLS with a certificate from the CA, or nothing.
		sopts.TLSConfig, sopts.TLSVerify, sopts.TLSTimeout = serverTLS(o.TLS), true, tlsTimeout
	}
	if len(o.Peers) > 0 || o.Routes != "" && o.Replicas > 1 {
		rh, rp, err := splitHostPort(o.Routes)
		if err != nil {
			return nil, fmt.Errorf("cluster: routes: %w", err)
		}
		sopts.Cluster = server.ClusterOpts{Name: clusterName, Host: rh, Port: rp}
		if o.TLS != nil {
			// Routes: mutual TLS both ways, as nats-server's own cluster
			// tls block sets it (the CA verifies the peer whichever side
			// dialed; the dialer checks the peer's name against its URL).
			sopts.Cluster.TLSConfig, sopts.Cluster.TLSTimeout = serverTLS(o.TLS), tlsTimeout
		}
		if o.Secret != "" {
			sopts.Cluster.Username, sopts.Cluster.Password = routeUser, o.Secret
		}
		for _, p := range o.Peers {
			u := &url.URL{Scheme: "nats-route", Host: p}
			if o.Secret != "" {
				u.User = url.UserPassword(routeUser, o.Secret)
			}
			sopts.Routes = append(sopts.Routes, u)
		}
	}
	if err := os.MkdirAll(o.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: store dir: %w", err)
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("cluster: NATS server: %w", err)
	}
	log := natsLog{l: o.Log, fatal: make(chan string, 1)}
	srv.SetLoggerV2(log, false, false, false)
	srv.Start()
	// A listener that cannot listen (a route port taken) is the server's
	// "fatal" error, after which it goes on without it: the start fails
	// with that error at once, not after the 30 s wait for a server that
	// would never be ready.
	for deadline := time.Now().Add(serverReady); !srv.ReadyForConnections(50 * time.Millisecond); {
		select {
		case msg := <-log.fatal:
			srv.Shutdown()
			return nil, fmt.Errorf("cluster: the NATS server: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return nil, fmt.Errorf("cluster: the NATS server did not accept connections on %s within %v", o.Listen, serverReady)
		}
	}
	return srv, nil
}

// serverReady bounds the embedded server's start.
const serverReady = 30 * time.Second

// tlsTimeout is how long, in seconds, a TLS handshake may take.
const tlsTimeout = 5

// serverTLS is t for the embedded server's listeners: a peer must
// present a certificate from the CA pool (and, dialing, this node checks
// the server's against the same pool).
func serverTLS(t *tls.Config) *tls.Config {
	c := t.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	c.ClientAuth = tls.RequireAndVerifyClientCert
	if c.ClientCAs == nil {
		c.ClientCAs = c.RootCAs
	}
	if c.RootCAs == nil {
		c.RootCAs = c.ClientCAs
	}
	return c
}

// clientTLS is t for a connection to an external NATS server.
func clientTLS(t *tls.Config) *tls.Config {
	c := t.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.RootCAs == nil {
		c.RootCAs = c.ClientCAs
	}
	return c
}

func splitHostPort(s string) (string, int, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return h, port, nil
}

// natsLog passes the embedded server's warnings and errors to slog; its
// notices (dozens at start) only at debug level. Its first fatal error
// (the server does not exit on it) also goes to fatal.
type natsLog struct {
	l     *slog.Logger
	fatal chan string
}

func (g natsLog) Noticef(f string, v ...any) { g.l.Debug("nats: " + fmt.Sprintf(f, v...)) }
func (g natsLog) Warnf(f string, v ...any)   { g.l.Warn("nats: " + fmt.Sprintf(f, v...)) }
func (g natsLog) Errorf(f string, v ...any)  { g.l.Error("nats: " + fmt.Sprintf(f, v...)) }
func (g natsLog) Debugf(f string, v ...any)  {}
func (g natsLog) Tracef(f string, v ...any)  {}

func (g natsLog) Fatalf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	g.l.Error("nats: " + msg)
	select {
	case g.fatal <- msg:
	default:
	}
}

// Name is the node's name.
func (n *Node) Name() string { return n.o.Name }

// ClientURL is where NATS clients reach this node's embedded server (""
// with an external NATS).
func (n *Node) ClientURL() string {
	if n.srv == nil {
		return ""
	}
	return n.srv.ClientURL()
}

// Ready is closed once the records stream and the buckets exist (enough
// servers answered); appends and leases wait for it.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// WaitReady waits for Ready, bounded by ctx.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return n.setupErr
	case <-ctx.Done():
		return fmt.Errorf("cluster: the stream and buckets are not ready (are enough nodes up?): %w", ctx.Err())
	}
}

// Close leaves the cluster (Leave) and stops the connection and the
// server.
func (n *Node) Close() error {
	n.Leave()
	n.nc.Close()
	n.shutdownServer()
	return nil
}

// Leave stops the keeper, gives up this node's leases (so others need not
// wait for them to expire) and its heartbeat, once, bounded by 2 s; the
// server still serves the others. Nodes stopped together leave first and
// then close: a lease given up while the others' servers stop would wait
// out the bound for a quorum that is going.
func (n *Node) Leave() {
	if !n.left.CompareAndSwap(false, true) {
		return
	}
	n.stop()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n.closing.Store(true)
	n.mu.Lock()
	leader, claims := n.leader, n.claims
	n.leader, n.claims = nil, map[string]*Claim{}
	n.mu.Unlock()
	if leader != nil {
		// The leader's singletons stop before another node can take the
		// lease and start its own.
		n.notifyLeader(false)
		_ = leader.Release(ctx)
	}
	for _, c := range claims {
		_ = c.lease.Release(ctx)
	}
	if n.nodes != nil {
		_ = n.nodes.Delete(ctx, n.o.Name)
	}
}

func (n *Node) shutdownServer() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// keep sets up the stream and buckets, then renews this node's leases and
// heartbeat and runs for leader, every third of the lease TTL.
func (n *Node) keep(ctx context.Context) {
	defer close(n.done)
	if err := n.setup(ctx); err != nil {
		n.setupErr = err
		close(n.ready)
		return
	}
	close(n.ready)
	t := time.NewTicker(n.o.LeaseTTL / 3)
	defer t.Stop()
	for {
		n.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setup creates (or finds) the records stream and the buckets, retrying
// while too few servers are up to place their replicas.
func (n *Node) setup(ctx context.Context) error {
	wait := 100 * time.Millisecond
	for {
		err := n.setupOnce(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.log.Debug("cluster: waiting for enough servers to create the records stream", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (n *Node) setupOnce(ctx context.Context) error {
	// Short attempts: a request made while the meta group is still
	// electing goes unanswered, and the next attempt is answered.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rcfg := jetstream.StreamConfig{
		Name:        RecordsStream,
		Description: "Mirror chat records: one subject per chat, one message per flush",
		Subjects:    []string{recordsPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    n.o.Replicas,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Discard:     jetstream.DiscardNew, // never drop a record to make room
		DenyDelete:  true,
		// Purge stays allowed: a purged chat's subject is purged up to
		// its purge flush (Records.Forget), so its rows leave the log too.
		// PersistMode stays the default: every write flushed (and, with
		// the server's SyncAlways, synced) before it is acknowledged.
	}
	records, err := n.js.CreateOrUpdateStream(ctx, rcfg)
	if err != nil && strings.Contains(err.Error(), "deny purge") {
		// A stream made by an earlier version denies purges for good:
		// purged chats' older records then stay in it (Forget says so).
		rcfg.DenyPurge = true
		records, err = n.js.CreateOrUpdateStream(ctx, rcfg)
	}
	if err != nil {
		return fmt.Errorf("records stream: %w", err)
	}
	kv := func(bucket, what string) (jetstream.KeyValue, error) {
		b, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: bucket, Description: what, History: 1, Storage: jetstream.FileStorage,
			Replicas: n.o.Replicas, LimitMarkerTTL: n.o.LeaseTTL,
		})
		if err != nil {
			return nil, fmt.Errorf("%s bucket: %w", bucket, err)
		}
		return b, nil
	}
	leases, err := kv(LeasesBucket, "Mirror leases: the leader's and each chat owner's, with per-key TTLs")
	if err != nil {
		return err
	}
	nodes, err := kv(NodesBucket, "Mirror nodes' heartbeats")
	if err != nil {
		return err
	}
	// The work index: a key per chat with work left (pending messages, a
	// running or interrupted turn), as its last flush left it, so the
	// leader's sweeper finds a dead node's unfinished chats without
	// reading every record. No TTL: it lasts until the work is done.
	work, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: WorkBucket, Description: "Mirror chats with work left", History: 1, Storage: jetstream.FileStorage,
		Replicas: n.o.Replicas,
	})
	if err != nil {
		return fmt.Errorf("%s bucket: %w", WorkBucket, err)
	}
	// The Telegram offset's bucket, made here with the others: a node
	// that becomes leader after another died must not need the meta
	// group (electing then) to reach it.
	telegram, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: TelegramBucket, Description: "Mirror's Telegram bot: the offset of receiving updates",
		History: 1, Storage: jetstream.FileStorage, Replicas: n.o.Replicas,
	})
	if err != nil {
		return fmt.Errorf("%s bucket: %w", TelegramBucket, err)
	}
	// The Telegram bot's bucket, replicated (tgstate.go): made here too,
	// so that a new leader reaches it without the meta group.
	tgState, err := makeTgState(ctx, n.js, n.o.Replicas)
	if err != nil {
		return fmt.Errorf("%s stream: %w", TelegramStream, err)
	}
	// The people registry's writes (people.go): any node writes them.
	peopleLog, err := n.js.CreateOrUpdateStream(ctx, peopleConfig(n.o.Replicas))
	if err != nil {
		return fmt.Errorf("%s stream: %w", PeopleStream, err)
	}
	n.mu.Lock()
	n.records, n.leases, n.nodes, n.work, n.telegram, n.tgState = records, leases, nodes, work, telegram, tgState
	n.people = peopleLog
	n.mu.Unlock()
	return nil
}

// tick renews what this node holds and runs for leader when nobody leads.
func (n *Node) tick(ctx context.Context) {
	if n.paused.Load() {
		return
	}
	keep := ctx
	ctx, cancel := context.WithTimeout(ctx, n.o.LeaseTTL/3)
	defer cancel()
	n.heartbeat(ctx)
	n.mu.Lock()
	claims := make([]*Claim, 0, len(n.claims))
	for _, c := range n.claims {
		claims = append(claims, c)
	}
	n.mu.Unlock()
	n.keepLeader(ctx)
	n.renewClaims(keep, claims)
}

// keepLeader renews the leader lease this node holds, or runs for leader
// when it holds none. A renewal that fails drops the lease only once it
// is Gone (refused by the store, or not renewed for a whole TTL), as a
// chat's is: a lease merely lapsed (one renewal late or timed out on a
// loaded machine, a store electing a leader) is still this node's, and
// nobody else can take it before it is Gone. Dropping it at once left
// the cluster without a leader (no sweeper, no Telegram poller) until
// the key expired, since this node could not take its own key again and
// nobody else could either. While lapsed IsLeader is false, so the
// leader's singletons pause; the next renewal restores it.
func (n *Node) keepLeader(ctx context.Context) {
	n.mu.Lock()
	leader := n.leader
	n.mu.Unlock()
	if leader != nil {
		if err := leader.Renew(ctx); err != nil && leader.Gone() {
			n.log.Warn("cluster: this node lost the leader lease", "err", err)
			n.mu.Lock()
			mine := n.leader == leader
			if mine {
				n.leader = nil
			}
			n.mu.Unlock()
			if mine {
				n.notifyLeader(false)
			}
		} else if err != nil && !leader.Held() {
			n.log.Warn("cluster: the leader lease lapsed (a renewal failed); the next renewal may restore it", "err", err)
		}
	} else if l, err := n.acquire(ctx, leaderKey); err == nil {
		n.log.Info("cluster: this node leads the cluster", "node", n.o.Name)
		n.mu.Lock()
		n.leader = l
		n.mu.Unlock()
		n.notifyLeader(true)
	} else if !errors.Is(err, ErrHeld) && ctx.Err() == nil {
		n.log.Debug("cluster: run for leader", "err", err)
	}
}

// lose drops a chat lease this node no longer holds and tells the owner.
func (n *Node) lose(c *Claim, err error) {
	n.mu.Lock()
	mine := n.claims[c.chat] == c
	if mine {
		delete(n.claims, c.chat)
	}
	n.mu.Unlock()
	if !mine {
		return
	}
	n.log.Warn("cluster: this node lost a chat's lease; its turn stops", "chat", c.chat, "err", err)
	c.lease.markLost()
	if n.o.OnLost != nil {
		n.o.OnLost(c.chat)
	}
}

// IsLeader says whether this node holds the leader lease now.
func (n *Node) IsLeader() bool {
	n.mu.Lock()
	l := n.leader
	n.mu.Unlock()
	return l != nil && l.Held()
}

// OnLeader registers fn, called with true when this node takes the leader
// lease and with false when it finds the lease lost, and with false by
// Close before it gives the lease up, so that a leader's singleton stops
// before another node can start its own. A lease can also run out
// between renewals without a call: LeaderUntil says until when it counts.
// fn runs on the node's keeper (or Close) and must return promptly.
// remove unregisters it.
func (n *Node) OnLeader(fn func(leading bool)) (remove func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.onLeader == nil {
		n.onLeader = map[int]func(bool){}
	}
	id := n.nextFn
	n.nextFn++
	n.onLeader[id] = fn
	return func() {
		n.mu.Lock()
		delete(n.onLeader, id)
		n.mu.Unlock()
	}
}

func (n *Node) notifyLeader(leading bool) {
	n.mu.Lock()
	fns := make([]func(bool), 0, len(n.onLeader))
	for _, fn := range n.onLeader {
		fns = append(fns, fn)
	}
	n.mu.Unlock()
	for _, fn := range fns {
		fn(leading)
	}
}

// LeaderUntil is until when this node may count on the leader lease
// (IsLeader holds until then unless it is renewed); zero when it does not
// lead.
func (n *Node) LeaderUntil() time.Time {
	n.mu.Lock()
	l := n.leader
	n.mu.Unlock()
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return time.Time{}
	}
	return l.expires
}

// buckets returns the stream and buckets, once Ready.
func (n *Node) buckets() (jetstream.Stream, jetstream.KeyValue, jetstream.KeyValue, error) {
	select {
	case <-n.ready:
	default:
		return nil, nil, nil, fmt.Errorf("cluster: not ready yet (waiting for enough nodes to place %d replicas): %w", n.o.Replicas, errNotReady)
	}
	if n.setupErr != nil {
		return nil, nil, nil, n.setupErr
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.records, n.leases, n.nodes, nil
}

var errNotReady = errors.New("not ready")

// markWork writes chat's entry in the work index when its state differs
// from what this node last wrote (or it never wrote one). The flush is
// stored already: a failure here is logged, and the next flush of the
// chat tries again.
func (n *Node) markWork(ctx context.Context, chat string, has bool) {
	n.mu.Lock()
	known, ok := n.hasWork[chat]
	kv := n.work
	n.mu.Unlock()
	if ok && known == has || kv == nil {
		return
	}
	var err error
	if has {
		_, err = kv.Put(ctx, chat, []byte(n.o.Name))
	} else {
		err = kv.Delete(ctx, chat)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		delete(n.hasWork, chat)
		n.log.Warn("cluster: the work index did not take a chat's state; its next flush tries again", "chat", chat, "err", err)
		return
	}
	if len(n.hasWork) >= maxWorkKnown {
		clear(n.hasWork) // forgotten states are written once more, no harm
	}
	n.hasWork[chat] = has
}

// workKnown says the work index holds chat as this node last wrote it:
// its last flush here left work.
func (n *Node) workKnown(chat string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hasWork[chat]
}

// maxWorkKnown bounds the work states a node remembers.
const maxWorkKnown = 1 << 16

// WorkLeft lists the chats the work index holds: their last flush left
// work (pending messages, a running or interrupted turn). The leader's
// sweeper takes those whose lease nobody holds.
func (n *Node) WorkLeft(ctx context.Context) ([]string, error) {
	if _, _, _, err := n.buckets(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	kv := n.work
	n.mu.Unlock()
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: list the work index: %w", err)
	}
	defer lister.Stop()
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}
