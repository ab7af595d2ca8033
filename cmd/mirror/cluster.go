package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway"
	"github.com/mirror-gateway/mirror/gateway/telegram"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// clusterUsage is the help of `mirror cluster`.
const clusterUsage = `usage:
  mirror cluster status [--json] [--config FILE] [--data DIR]`

// startNode starts this gateway's cluster node (its embedded NATS server,
// or its connection to an external one, and the leader election) when
// cluster mode is on; nil, nil in single-node mode. httpAddr is where the
// gateway listens, shown to the other nodes. The embedded server's routes
// and clients must present a secret derived from the access token (tok),
// which is the same on every node of a cluster.
func startNode(ctx context.Context, cfg *config.Config, dir, tok, httpAddr string, log *slog.Logger, lost *routerSlot) (*cluster.Node, error) {
	if !cfg.Cluster.Enabled {
		return nil, nil
	}
	cl := cfg.Cluster
	tlsConf, err := cfg.ClusterTLSConfig(dir) // nil without cluster.tls
	if err != nil {
		return nil, err
	}
	node, err := cluster.Start(ctx, cluster.Options{Name: cl.Name, Listen: cl.Listen, Routes: cl.Routes, Peers: cl.Peers,
		StoreDir: cfg.ClusterStorePath(dir), NATSURL: cl.NATSURL, Replicas: cl.Replicas, LeaseTTL: cl.LeaseTTL,
		Secret: cluster.RouteSecret(tok), TLS: tlsConf, HTTP: httpAddr, Log: log.With("node", cl.Name), OnLost: lost.lost})
	if err != nil {
		return nil, err
	}
	log.Info("cluster: node started; the records stream and the leader follow once enough nodes are up",
		"node", cl.Name, "nats", node.ClientURL(), "peers", len(cl.Peers), "replicas", cl.Replicas, "tls", tlsConf != nil)
	return node, nil
}

// routerSlot lets the node, started first, tell the router made after it
// that a chat's lease was lost.
type routerSlot struct{ atomic.Pointer[cluster.Router] }

func (s *routerSlot) lost(chat string) {
	if r := s.Load(); r != nil {
		r.Lost(chat)
	}
}

// clusterChats are what the chats of a cluster node run on: the record log
// and the owners every per-chat operation is routed to (nil, nil in
// single-node mode: bbolt alone, every chat here). serve hands them to
// chats.New, then the Service to serve, which starts the chats this node
// is asked to own, and the leader's sweeper (which takes the chats a dead
// node left with work). stop gives this node's chats up (after the Service
// closed, before the node).
func clusterChats(node *cluster.Node, lost *routerSlot) (log chats.RecordLog, owners chats.Owners, serve func(*chats.Service), stop func()) {
	if node == nil {
		return nil, nil, func(*chats.Service) {}, func() {}
	}
	local := cluster.NewLocal()
	router := node.NewRouter(local)
	lost.Store(router)
	var sweeper *cluster.Sweeper
	var following *cluster.Following
	serve = func(s *chats.Service) {
		local.Serve(s)
		sweeper = router.Sweep()
		following = node.Follow(s) // every chat's flushes reach this node's bbolt: lists and search see the whole cluster
	}
	return node.Records(), cluster.NewOwners(router, node.NewFanout(router)), serve, func() {
		if following != nil {
			following.Close()
		}
		if sweeper != nil {
			sweeper.Close()
		}
		router.Close()
	}
}

// clusterTelegram is the Telegram bot's leader lease, shared offset and
// replicated bucket in cluster mode (only the leader receives updates;
// every node keeps a copy of the bot's state); nils and a no-op in
// single-node mode. close goes after the bot's Close.
func clusterTelegram(node *cluster.Node) (telegram.Leader, telegram.Offsets, telegram.Replica, func()) {
	if node == nil {
		return nil, nil, nil, func() {}
	}
	tg := node.Telegram()
	return tg, tg, tg, tg.Close
}

// clusterPeople makes the people registry the cluster's in cluster mode:
// its writes go through the cluster's log, and every node follows it into
// its own file (chats/people Replicate). The returned func stops following.
// In single-node mode a file that was a node's copy becomes this gateway's
// own again.
func clusterPeople(node *cluster.Node, reg *people.Registry, log *slog.Logger) func() {
	if node == nil {
		if err := reg.Leave(); err != nil {
			log.Warn("people: this file was a cluster node's copy and stays one", "err", err)
		}
		return func() {}
	}
	return reg.Replicate(node.People(), log)
}

// clusterBlobs shares the attachments with the other nodes in cluster
// mode: an upload is stored in the cluster too, and a blob missing here
// is fetched from it (chats.SharedBlobs). Nothing in single-node mode.
func clusterBlobs(node *cluster.Node, blobs *chats.Blobs) {
	if node != nil {
		blobs.Share(node.SharedBlobs())
	}
}

// clusterRoutes are the routes of a cluster node (none in single-node mode).
func clusterRoutes(node *cluster.Node) []gateway.Route {
	if node == nil {
		return nil
	}
	return []gateway.Route{gateway.ClusterRoute(func(ctx context.Context) (any, error) { return node.Status(ctx) })}
}

// clusterCmd runs `mirror cluster status`: it asks the running gateway of
// the data dir (GET /api/cluster, with the access token) and prints the
// nodes, the leader and the chats per node.
func clusterCmd(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return usageError{errors.New(clusterUsage)}
	}
	sub, rest := args[0], args[1:]
	if sub == "-h" || sub == "--help" || sub == "help" {
		return helpShown{clusterUsage + "\n"}
	}
	if sub != "status" {
		return usageError{fmt.Errorf("cluster: unknown subcommand %q\n\n%s", sub, clusterUsage)}
	}
	var c common
	var asJSON bool
	f := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	c.register(f)
	f.BoolVar(&asJSON, "json", false, "print the status as JSON")
	if err := parseFlags(f, rest); err != nil {
		return err
	}
	cfg, err := c.loadClient()
	if err != nil {
		return err
	}
	_, tok, err := tokenIn(cfg, getenv)
	if err != nil {
		return err
	}
	raw, err := clusterOverHTTP(ctx, cfg, tok)
	if err != nil {
		return err
	}
	if asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	var st cluster.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("the gateway's answer: %w", err)
	}
	return describeCluster(stdout, st)
}

// clusterOverHTTP asks the running gateway for GET /api/cluster.
func clusterOverHTTP(ctx context.Context, cfg *config.Config, tok string) ([]byte, error) {
	root, err := gatewayURL(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := callGateway(ctx, http.DefaultClient, cfg.Listen, root, tok, http.MethodGet, "/api/cluster", nil)
	if errors.Is(err, errNoGateway) {
		return nil, fmt.Errorf("no gateway answers at %s (start it with mirror serve --cluster)", cfg.Listen)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusForbidden:
		return nil, fmt.Errorf("the gateway at %s answers the cluster's status to owners only", cfg.Listen)
	case http.StatusNotFound:
		return nil, fmt.Errorf("the gateway at %s is not a cluster node (start it with mirror serve --cluster)", cfg.Listen)
	}
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	return nil, fmt.Errorf("cluster status: %s %s", resp.Status, printable(e.Error))
}

// describeCluster prints the status as a table: one line per node.
func describeCluster(w io.Writer, st cluster.Status) error {
	if !st.Ready {
		_, err := fmt.Fprintf(w, "cluster: forming: node %s waits for enough nodes to keep %d replicas\n", printable(st.Node), st.Replicas)
		return err
	}
	leader := printable(st.Leader)
	if leader == "" {
		leader = "none yet"
	}
	fmt.Fprintf(w, "cluster: %d nodes, leader %s (answered by %s, %d replicas)\n", len(st.Nodes), leader, printable(st.Node), st.Replicas)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLEADER\tCHATS\tHTTP\tSTARTED")
	for _, n := range st.Nodes {
		mark, started := "", "-"
		if n.Leader {
			mark = "*"
		}
		if !n.Started.IsZero() {
			started = n.Started.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", printable(n.Name), mark, n.Chats, printable(n.HTTP), started)
	}
	return tw.Flush()
}

// printable keeps what another node reported from driving the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// clusterQuotas is the quota book the engine uses: book in single-node
// mode; in cluster mode the cluster's, whose grants the leader makes for
// every node. The returned func stops it (before the node closes).
func clusterQuotas(node *cluster.Node, book *quota.Book, log *slog.Logger) (quota.Keeper, func()) {
	if node == nil {
		return book, func() {}
	}
	qb := node.Quotas(quota.Options{Log: log})
	return qb, qb.Close
}

// checkWorkspace, in cluster mode, refuses the built-in file and shell
// tools until the workspace is known to be shared by every node, and
// again whenever a node that does not share it joins: one chat's files
// must not be split across machines. Each change is logged.
func checkWorkspace(ctx context.Context, node *cluster.Node, toolbox *tools.Registry, log *slog.Logger) {
	if node == nil {
		return
	}
	unconfirmed := "the cluster has not yet confirmed that every node shares the workspace " + toolbox.Workspace()
	toolbox.Refuse(unconfirmed)
	node.SetWorkspaceRefused(unconfirmed)
	go func() {
		last := "unchecked"
		err := node.WatchWorkspace(ctx, toolbox.Workspace(), func(err error) {
			why := ""
			if err != nil {
				why = err.Error()
			}
			toolbox.Refuse(why)
			node.SetWorkspaceRefused(why)
			if why == last {
				return
			}
			last = why
			if err != nil {
				log.Error("cluster: file and shell tools are refused on this node", "err", err)
			} else {
				log.Info("cluster: the workspace is shared by every live node; file and shell tools run", "workspace", toolbox.Workspace())
			}
		})
		if err != nil && ctx.Err() == nil {
			log.Error("cluster: the workspace could not be checked; file and shell tools stay refused on this node", "err", err)
		}
	}()
}

// clusterMonitor makes the breaker-history prune one of the leader's
// singletons and publishes this node's unresolved breakers in its
// heartbeat, for the Monitor of every node.
func clusterMonitor(node *cluster.Node, mon *monitor.Monitor) {
	mon.PruneOnlyWhen(node.IsLeader)
	node.SetBreakers(func() any { return mon.Unresolved() })
}
