package config

import (
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Cluster makes this gateway one node of a cluster on NATS JetStream
// (chats/cluster). It is off unless enabled is true or `mirror serve
// --cluster` is given; single-node mode (bbolt) ignores all of it.
type Cluster struct {
	// Enabled runs the gateway as a node, as --cluster does.
	Enabled bool `yaml:"enabled"`
	// Name is this node's name, unique in the cluster (letters, digits,
	// - and _); it names the node in leases and in `mirror cluster status`.
	Name string `yaml:"name"`
	// Listen is where the embedded NATS server takes clients, host:port.
	Listen string `yaml:"listen"`
	// Routes is where the embedded NATS server takes its peers' routes.
	Routes string `yaml:"routes"`
	// Peers are the other nodes' routes addresses, host:port each.
	Peers []string `yaml:"peers"`
	// StoreDir holds the embedded server's JetStream files; relative to
	// the data dir ("cluster" by default).
	StoreDir string `yaml:"store_dir"`
	// NATSURL, when set, points the node at an external NATS cluster
	// (nats://host:port, comma-separated) instead of an embedded server;
	// listen, routes and peers are then unused.
	NATSURL string `yaml:"nats_url"`
	// Replicas is how many servers keep each record (1, 3 or 5).
	Replicas int `yaml:"replicas"`
	// LeaseTTL is how long a lease (the leader's, a chat owner's) lasts
	// unless renewed; a dead node's work moves on after at most this long.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// TLS, when set, encrypts and authenticates the routes between the
	// embedded servers, their client port, and the connection to an
	// external NATS (clustertls.go).
	TLS ClusterTLS `yaml:"tls"`
}

// defaultCluster is the cluster section's built-in values (disabled).
func defaultCluster() Cluster {
	return Cluster{Listen: "127.0.0.1:4222", Routes: "127.0.0.1:6222", StoreDir: "cluster", Replicas: 3, LeaseTTL: 5 * time.Second}
}

// nodeName is what a node's name may be: one NATS subject token and one
// KV key token, readable in a status table.
var nodeName = form{regexp.MustCompile(`^[A-Za-z0-9_-]+$`), 64}

// EnableCluster turns cluster mode on (mirror serve --cluster) and checks
// what a node needs beyond the section's own format: its name, and peers
// or an external NATS URL.
func (c *Config) EnableCluster() error {
	c.Cluster.Enabled = true
	return c.Validate()
}

// ClusterStorePath is cluster.store_dir resolved against the data dir.
func (c *Config) ClusterStorePath(dataDir string) string {
	if c.Cluster.StoreDir == "" {
		return ""
	}
	if filepath.IsAbs(c.Cluster.StoreDir) {
		return c.Cluster.StoreDir
	}
	return filepath.Join(dataDir, c.Cluster.StoreDir)
}

func (v *validator) cluster() {
	cl := v.c.Cluster
	if cl.Name != "" && !nodeName.MatchString(cl.Name) {
		v.fail("cluster.name", "letters, digits, - and _ only (at most 64), not %s", show(cl.Name))
	}
	if cl.Enabled && cl.Name == "" {
		v.fail("cluster.name", "required in cluster mode: this node's name, unique in the cluster, such as node1")
	}
	v.hostPort("cluster.listen", cl.Listen, "127.0.0.1:4222")
	v.hostPort("cluster.routes", cl.Routes, "127.0.0.1:6222")
	for i, p := range cl.Peers {
		v.hostPort("cluster.peers["+strconv.Itoa(i)+"]", p, "10.0.0.2:6222")
	}
	if cl.NATSURL != "" {
		for u := range strings.SplitSeq(cl.NATSURL, ",") {
			p, err := url.Parse(strings.TrimSpace(u))
			if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Host == "" {
				v.fail("cluster.nats_url", "want nats://host:port (several separated by commas), not %s", show(u))
				break
			}
		}
		if len(cl.Peers) > 0 {
			v.fail("cluster.peers", "the embedded server's peers: with nats_url the node uses the external NATS cluster, so leave peers out")
		}
	}
	if cl.Enabled && cl.NATSURL == "" && len(cl.Peers) == 0 && cl.Replicas > 1 {
		v.fail("cluster.peers", "required in cluster mode: the other nodes' routes addresses (host:port), or nats_url for an external NATS cluster")
	}
	switch cl.Replicas {
	case 1, 3, 5:
	default:
		v.fail("cluster.replicas", "want 1, 3 or 5 (an odd number, so a majority can decide), not %d", cl.Replicas)
	}
	if cl.LeaseTTL < time.Second {
		v.fail("cluster.lease_ttl", "must be at least 1s (NATS counts message TTLs in seconds), such as 5s")
	}
	if strings.ContainsRune(cl.StoreDir, 0) {
		v.fail("cluster.store_dir", "contains a NUL byte")
	}
	v.clusterTLS()
}

// hostPort checks a host:port key of the cluster section ("" is allowed
// where the key is unused).
func (v *validator) hostPort(field, s, example string) {
	if s == "" {
		return
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || strings.ContainsAny(host, " /") {
		v.fail(field, "want host:port such as %s, not %s", example, show(s))
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 || strings.HasPrefix(port, "+") {
		v.fail(field, "the port must be a number from 0 to 65535, not %s", show(port))
	}
}
