package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// TestClusterTLSProcesses: three real `mirror serve --cluster` processes
// whose runtime.yaml gives each a certificate from one CA (cluster.tls)
// form a cluster over mutual TLS and elect a leader; a node whose
// cluster.tls names a file it cannot read does not start, and says which
// line and key.
func TestClusterTLSProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways")
	}
	ca := clustertest.NewCA(t, "mirror test CA")
	dir := t.TempDir()
	extra := make([]string, 3)
	for i := range extra {
		cert, key, caFile := ca.Files(t, dir, fmt.Sprintf("n%d", i+1))
		extra[i] = fmt.Sprintf("  tls:\n    cert: %s\n    key: %s\n    ca: %s\n", cert, key, caFile)
	}
	nodes := startClusterProcs(t, 3, "2s", extra...)
	waitStatus(t, nodes[2], 60*time.Second, "three nodes over TLS and a leader", func(st cluster.Status) bool {
		return st.Ready && st.Leader != "" && len(st.Nodes) == 3
	})
	for _, nd := range nodes {
		if !strings.Contains(nd.p.errs.String(), "tls=true") {
			t.Errorf("%s does not say its routes are on TLS:\n%s", nd.name, tail(nd.p.errs.String(), 2000))
		}
	}

	cfg := filepath.Join(t.TempDir(), "runtime.yaml")
	yaml := "cluster:\n  name: n9\n  listen: 127.0.0.1:0\n  routes: " + clustertest.RouteAddr(t) + "\n  peers: [127.0.0.1:1]\n" +
		"  tls:\n    cert: " + filepath.Join(dir, "missing.pem") + "\n    key: " + filepath.Join(dir, "n1-key.pem") + "\n    ca: " + filepath.Join(dir, "ca.pem") + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--cluster", "--config", cfg, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0"},
		&out, &errb, func(k string) string {
			if k == "MIRROR_TOKEN" {
				return "test-token-0123456789abcdef"
			}
			return ""
		})
	if code == 0 || !strings.Contains(errb.String(), "runtime.yaml:7: cluster.tls.cert: cannot read") {
		t.Fatalf("serve with an unreadable certificate: exit %d %s", code, errb.String())
	}
}
