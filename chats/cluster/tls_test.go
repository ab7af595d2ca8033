package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// tlsOf is the TLS setting config.ClusterTLSConfig gives for a node
// whose certificate ca issued (nil ca: no certificate, the pool of
// trusted alone).
func tlsOf(t *testing.T, ca, trusted *clustertest.CA, name string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(trusted.PEM)
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	if ca != nil {
		certPEM, keyPEM := ca.Issue(t, name)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// startTLSCluster is startCluster with every node's routes and client
// port on mutual TLS with ca.
func startTLSCluster(t *testing.T, n int, ca *clustertest.CA) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, lost: make(chan string, 16)}
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freeAddr(t)
	}
	base := t.TempDir()
	for i := range n {
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		name := fmt.Sprintf("n%d", i+1)
		tc.opts = append(tc.opts, Options{Name: name, Listen: "127.0.0.1:0", Routes: routes[i], Peers: peers,
			StoreDir: filepath.Join(base, name), Replicas: min(n, 3), LeaseTTL: testTTL, Secret: RouteSecret("test-token"),
			TLS: tlsOf(t, ca, ca, name), OnLost: func(chat string) { tc.lost <- chat }, Log: testLog})
	}
	tc.nodes = make([]*Node, n)
	for i := range n {
		tc.start(i)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, nd := range tc.nodes {
			if nd != nil {
				wg.Go(func() { nd.Close() })
			}
		}
		wg.Wait()
	})
	tc.waitReady()
	return tc
}

// dialTLS connects to addr over TLS with conf as a route does (TLS
// first; the server then sends its INFO) or, client, as a NATS client
// does (the server's INFO in clear, then TLS, then CONNECT with the
// secret and a PING), and returns the line that shows it was let in (an
// INFO, a PONG). A peer the server refuses gets an error, at the
// handshake or (TLS 1.3: the server checks the client's certificate after
// the client finished) at the first read.
func dialTLS(addr string, conf *tls.Config, client bool) (string, error) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	if client {
		// The INFO line, read byte by byte so nothing after it is taken
		// from the TLS stream.
		one := make([]byte, 1)
		for one[0] != '\n' {
			if _, err := raw.Read(one); err != nil {
				return "", err
			}
		}
	}
	conn := tls.Client(raw, conf)
	if err := conn.Handshake(); err != nil {
		return "", err
	}
	if client {
		fmt.Fprintf(conn, "CONNECT {\"user\":%q,\"pass\":%q,\"verbose\":false}\r\nPING\r\n", routeUser, RouteSecret("test-token"))
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if !client || strings.HasPrefix(line, "PONG") {
			return line, nil
		}
		if strings.HasPrefix(line, "-ERR") {
			return "", errors.New(strings.TrimSpace(line))
		}
	}
}

// TestClusterMutualTLS: three nodes whose routes and client ports are on
// mutual TLS with one CA form a cluster (the records stream on three
// servers takes a fenced append on one node and is read on another), and
// each listener refuses a peer whose certificate another CA signed, or
// that has none, or that does not speak TLS; a certificate from the CA
// is let in.
func TestClusterMutualTLS(t *testing.T) {
	ca := clustertest.NewCA(t, "mirror test CA")
	tc := startTLSCluster(t, 3, ca)
	const chat = "c_tls1"
	_, pos, err := tc.nodes[0].ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.nodes[0].Records().Append(ctx(t), chat, pos, flushOf(chat, 1, 3)); err != nil {
		t.Fatal(err)
	}
	if got := readSeqs(t, tc.nodes[2], chat); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("node 3 reads %v", got)
	}
	if n := tc.nodes[0].srv.NumRoutes(); n < 2 {
		t.Fatalf("node 1 has %d routes, want its two peers", n)
	}

	stranger := clustertest.NewCA(t, "another CA")
	cu, err := url.Parse(tc.nodes[0].ClientURL())
	if err != nil || cu.Scheme != "tls" {
		t.Fatalf("the client URL %q does not say TLS: %v", tc.nodes[0].ClientURL(), err)
	}
	clientAddr := cu.Host
	for _, l := range []struct {
		name, addr string
		client     bool
	}{{"routes", tc.opts[0].Routes, false}, {"clients", clientAddr, true}} {
		for _, p := range []struct {
			name string
			conf *tls.Config
			ok   bool
		}{
			{"a certificate from the CA", tlsOf(t, ca, ca, "peer"), true},
			{"a certificate from another CA", tlsOf(t, stranger, ca, "rogue"), false},
			{"no certificate", tlsOf(t, nil, ca, ""), false},
		} {
			t.Run(l.name+"/"+p.name, func(t *testing.T) {
				p.conf.ServerName = "127.0.0.1"
				line, err := dialTLS(l.addr, p.conf, l.client)
				if p.ok {
					if err != nil || !strings.HasPrefix(line, "INFO ") && !strings.HasPrefix(line, "PONG") {
						t.Fatalf("refused: %q %v", line, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("let in (the server sent %.40q)", line)
				}
			})
		}
		t.Run(l.name+"/plain TCP", func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The routes port waits for a TLS handshake; the clients port
			// first says TLS is required. Either way the secret sent in
			// clear gets no PONG: the connection is closed.
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			r := bufio.NewReader(conn)
			fmt.Fprintf(conn, "CONNECT {\"user\":%q,\"pass\":%q}\r\nPING\r\n", routeUser, RouteSecret("test-token"))
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return // closed: refused
				}
				if strings.HasPrefix(line, "PONG") {
					t.Fatal("a plain connection with the secret was let in")
				}
				if strings.HasPrefix(line, "INFO ") && !strings.Contains(line, `"tls_required":true`) {
					t.Fatalf("a plain connection is offered %q, want TLS required", line)
				}
			}
		})
	}
}

// TestExternalNATSOverTLS: a node given nats_url and the cluster's TLS
// connects to an embedded server whose client port requires it, and uses
// it as TestExternalNATS does; without a certificate from the CA it is
// refused at Start with an error, not left waiting.
func TestExternalNATSOverTLS(t *testing.T) {
	ca := clustertest.NewCA(t, "mirror test CA")
	tc := startTLSCluster(t, 1, ca)
	a := tc.nodes[0]
	pu, err := url.Parse(a.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword(routeUser, RouteSecret("test-token"))
	u := pu.String()
	b, err := Start(context.Background(), Options{Name: "ext", NATSURL: u, Replicas: 1, LeaseTTL: testTTL, Log: testLog, TLS: tlsOf(t, ca, ca, "ext")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	const chat = "c_ext_tls"
	_, pos, err := a.ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Records().Append(ctx(t), chat, pos, flushOf(chat, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Records().Append(ctx(t), chat, pos, flushOf(chat, 3, 3)); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("append after a stale position over TLS: %v", err)
	}
	if got := readSeqs(t, b, chat); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("record %v", got)
	}

	stranger := clustertest.NewCA(t, "another CA")
	for _, c := range []struct {
		name string
		conf *tls.Config
	}{
		{"another CA's certificate", tlsOf(t, stranger, ca, "rogue")},
		{"no TLS", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := Start(context.Background(), Options{Name: "rogue", NATSURL: u, Replicas: 1, LeaseTTL: testTTL, Log: testLog, TLS: c.conf})
			if err == nil {
				n.Close()
				t.Fatal("connected")
			}
		})
	}
}
