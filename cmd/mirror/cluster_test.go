package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// clusterNode is one `mirror serve --cluster` process of a test.
type clusterNode struct {
	name, cfg, data string
	p               *proc
}

// startClusterProcs runs n real `mirror serve --cluster` processes on
// 127.0.0.1, each with its own data dir and runtime.yaml naming the
// others' routes (ports chosen now).
// extra, when given, is appended to node i's runtime.yaml.
func startClusterProcs(t *testing.T, n int, leaseTTL string, extra ...string) []*clusterNode {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = clustertest.RouteAddr(t)
	}
	nodes := make([]*clusterNode, n)
	for i := range n {
		dir := t.TempDir()
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		nd := &clusterNode{name: fmt.Sprintf("n%d", i+1), cfg: filepath.Join(dir, "runtime.yaml"), data: filepath.Join(dir, "data")}
		yaml := fmt.Sprintf("cluster:\n  name: %s\n  listen: 127.0.0.1:0\n  routes: %s\n  peers: [%s]\n  lease_ttl: %s\n",
			nd.name, routes[i], strings.Join(peers, ", "), leaseTTL)
		if i < len(extra) {
			yaml += extra[i]
		}
		if err := os.WriteFile(nd.cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "serve", "--cluster", "--config", nd.cfg, "--data", nd.data, "--addr", "127.0.0.1:0")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN=test-token-0123456789abcdef")
		nd.p = startCmd(t, cmd)
		nodes[i] = nd
	}
	return nodes
}

// status runs `mirror cluster status` (args added) against nd's gateway.
func (nd *clusterNode) status(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return "test-token-0123456789abcdef"
		}
		return ""
	}
	code := run(context.Background(), append([]string{"cluster", "status", "--config", nd.cfg, "--data", nd.data}, args...), &out, &errb, getenv)
	return out.String() + errb.String(), code
}

// statusJSON is nd's answer to `mirror cluster status --json`.
func (nd *clusterNode) statusJSON(t *testing.T) (cluster.Status, bool) {
	t.Helper()
	out, code := nd.status(t, "--json")
	var st cluster.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		return st, false
	}
	return st, true
}

// waitStatus polls nd's status until ok holds, within limit.
func waitStatus(t *testing.T, nd *clusterNode, limit time.Duration, what string, ok func(cluster.Status) bool) cluster.Status {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, got := nd.statusJSON(t)
		if got && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			out, _ := nd.status(t)
			t.Fatalf("%s: not within %v; last status %+v\n%s\nstderr of %s: %s", what, limit, st, out, nd.name, tail(nd.p.errs.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestClusterFormsAndFailsOver is the test 1 with real processes:
// three `mirror serve --cluster` nodes form a cluster, `mirror cluster
// status` shows the three and one leader; kill -9 of the leader gives a
// new leader among the survivors within a bounded time.
func TestClusterFormsAndFailsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways")
	}
	nodes := startClusterProcs(t, 3, "2s")
	st := waitStatus(t, nodes[0], 60*time.Second, "three nodes and a leader", func(st cluster.Status) bool {
		return st.Ready && st.Leader != "" && len(st.Nodes) == 3
	})
	// The route needs the access token like every other.
	resp, err := http.Get("http://" + nodes[0].p.addr + "/api/cluster")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api/cluster without the token: %d", resp.StatusCode)
	}
	// Another node answers the same once its view has the three (under
	// the whole suite's load, a node's presence may reach it a beat later).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, code := nodes[1].status(t)
		if code == 0 && strings.Contains(out, "cluster: 3 nodes, leader "+st.Leader) && strings.Contains(out, "NODE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status (exit %d):\n%s", code, out)
		}
	}
	for _, n := range st.Nodes {
		if n.HTTP == "" || n.Leader != (n.Name == st.Leader) {
			t.Fatalf("node %+v in %+v", n, st)
		}
	}
	var leader *clusterNode
	var survivors []*clusterNode
	for _, nd := range nodes {
		if nd.name == st.Leader {
			leader = nd
		} else {
			survivors = append(survivors, nd)
		}
	}
	killed := time.Now()
	if err := leader.p.cmd.Process.Kill(); err != nil { // kill -9: no lease is given up
		t.Fatal(err)
	}
	_ = leader.p.cmd.Wait()
	st = waitStatus(t, survivors[0], 30*time.Second, "a new leader after kill -9 of "+leader.name, func(st cluster.Status) bool {
		return st.Leader != "" && st.Leader != leader.name
	})
	t.Logf("new leader %s %v after kill -9 of %s (lease_ttl 2s)", st.Leader, time.Since(killed).Round(time.Millisecond), leader.name)
	// The survivors agree, and the dead node's heartbeat runs out.
	waitStatus(t, survivors[1], 30*time.Second, "the other survivor agrees and the dead node is gone", func(s cluster.Status) bool {
		return s.Leader == st.Leader && len(s.Nodes) == 2
	})
	// SIGTERM still stops a node cleanly (exit 0), though a majority of
	// the cluster's servers is gone after it.
	survivors[1].p.stop(t)
	survivors[0].p.stop(t)
}

// TestClusterStatusErrors: status against a single-node gateway says it is
// not a cluster node; with no gateway it says none answers; serve
// --cluster without a node name is a usage error, with line and field.
func TestClusterStatusErrors(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	nd := &clusterNode{name: "single", cfg: filepath.Join(t.TempDir(), "none.yaml"), data: data}
	if err := os.WriteFile(nd.cfg, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := nd.status(t); code != 1 || !strings.Contains(out, "is not a cluster node") {
		t.Fatalf("status of a single node (exit %d): %s", code, out)
	}
	p.stop(t)
	if out, code := nd.status(t); code != 1 || !strings.Contains(out, "no gateway answers") {
		t.Fatalf("status with no gateway (exit %d): %s", code, out)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--cluster", "--config", nd.cfg, "--data", data, "--addr", "127.0.0.1:0"}, &out, &errb, func(string) string { return "" })
	if code != 2 || !strings.Contains(errb.String(), "cluster.name: required in cluster mode") {
		t.Fatalf("serve --cluster without a name: exit %d %s", code, errb.String())
	}
	if out, code := nd.status(t, "--help"); code != 0 || !strings.Contains(out, "-json") {
		t.Fatalf("status --help (exit %d): %s", code, out)
	}
}

// TestClusterWorkspaceCheck: real `mirror serve --cluster` processes whose
// runtime.yaml names one workspace all run file and shell tools; when each
// has its own (the default, next to its runtime.yaml), every node refuses
// them and says why, in its heartbeat (status) and in its log.
func TestClusterWorkspaceCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways, twice")
	}
	shared := t.TempDir()
	ws := "tools:\n  workspace: " + shared + "\n"
	tests := []struct {
		name    string
		extra   []string
		refused bool
	}{
		{"one workspace", []string{ws, ws, ws}, false},
		{"a workspace each", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := startClusterProcs(t, 3, "2s", tt.extra...)
			waitStatus(t, nodes[0], 60*time.Second, "every node checked its workspace", func(st cluster.Status) bool {
				if !st.Ready || len(st.Nodes) != 3 {
					return false
				}
				for _, n := range st.Nodes {
					if tt.refused != (n.WorkspaceRefused != "") || strings.Contains(n.WorkspaceRefused, "not yet confirmed") {
						return false
					}
					if tt.refused && !strings.Contains(n.WorkspaceRefused, "is not shared by every node") {
						return false
					}
				}
				return true
			})
			for _, nd := range nodes {
				nd.p.stop(t)
				logged := strings.Contains(nd.p.errs.String(), "file and shell tools are refused on this node")
				if logged != tt.refused {
					t.Fatalf("%s: refusal logged %v, want %v; stderr %s", nd.name, logged, tt.refused, tail(nd.p.errs.String(), 2000))
				}
			}
		})
	}
}
