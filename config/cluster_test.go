package config

import (
	"strings"
	"testing"
	"time"
)

// TestClusterSettings: the cluster section is read, off by default, and a
// bad key is refused with its line and field; EnableCluster asks for what
// a node needs.
func TestClusterSettings(t *testing.T) {
	d := Default()
	if d.Cluster.Enabled || d.Cluster.Replicas != 3 || d.Cluster.LeaseTTL != 5*time.Second {
		t.Fatalf("default cluster section: %+v", d.Cluster)
	}
	c, err := Parse([]byte("cluster:\n  enabled: true\n  name: n1\n  listen: 127.0.0.1:4300\n  routes: 127.0.0.1:6300\n  peers: [127.0.0.1:6301, 127.0.0.1:6302]\n  lease_ttl: 3s\n"), "runtime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cl := c.Cluster; !cl.Enabled || cl.Name != "n1" || len(cl.Peers) != 2 || cl.LeaseTTL != 3*time.Second || cl.Replicas != 3 {
		t.Fatalf("%+v", cl)
	}
	if got := c.ClusterStorePath("/d"); got != "/d/cluster" {
		t.Errorf("store path %q", got)
	}
	for _, tc := range []struct{ src, want string }{
		{"cluster:\n  name: \"a b\"\n", "runtime.yaml:2: cluster.name: letters, digits, - and _ only"},
		{"cluster:\n  enabled: true\n  peers: [127.0.0.1:6301]\n", "runtime.yaml:1: cluster.name: required in cluster mode"},
		{"cluster:\n  enabled: true\n  name: n1\n", "runtime.yaml:1: cluster.peers: required in cluster mode"},
		{"cluster:\n  listen: nohost\n", "runtime.yaml:2: cluster.listen: want host:port"},
		{"cluster:\n  routes: 127.0.0.1:99999\n", "runtime.yaml:2: cluster.routes: the port must be a number from 0 to 65535"},
		{"cluster:\n  peers:\n    - 127.0.0.1:6301\n    - bad\n", "runtime.yaml:4: cluster.peers[1]: want host:port"},
		{"cluster:\n  nats_url: http://x:4222\n", "runtime.yaml:2: cluster.nats_url: want nats://host:port"},
		{"cluster:\n  nats_url: nats://x:4222\n  peers: [127.0.0.1:6301]\n", "runtime.yaml:3: cluster.peers: the embedded server's peers"},
		{"cluster:\n  replicas: 2\n", "runtime.yaml:2: cluster.replicas: want 1, 3 or 5"},
		{"cluster:\n  lease_ttl: 500ms\n", "runtime.yaml:2: cluster.lease_ttl: must be at least 1s"},
		{"cluster:\n  peer: [x]\n", "runtime.yaml:2: cluster.peer: unknown key"},
	} {
		_, err := Parse([]byte(tc.src), "runtime.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
	// --cluster on a file without the section: the name is asked for.
	c, err = Parse([]byte("listen: 127.0.0.1:1\n"), "runtime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnableCluster(); err == nil || !strings.Contains(err.Error(), "cluster.name: required in cluster mode") {
		t.Errorf("EnableCluster without a name: %v", err)
	}
}
