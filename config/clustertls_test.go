package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// TestClusterTLSKeys: cluster.tls is read, all three keys or none, each
// refused with its line and field.
func TestClusterTLSKeys(t *testing.T) {
	c, err := Parse([]byte("cluster:\n  tls:\n    cert: /etc/m/n1.pem\n    key: /etc/m/n1-key.pem\n    ca: /etc/m/ca.pem\n"), "runtime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tl := c.Cluster.TLS; tl.Cert != "/etc/m/n1.pem" || tl.Key != "/etc/m/n1-key.pem" || tl.CA != "/etc/m/ca.pem" {
		t.Fatalf("%+v", tl)
	}
	if cfg, err := Default().ClusterTLSConfig(t.TempDir()); cfg != nil || err != nil {
		t.Fatalf("no cluster.tls: %v %v, want nil, nil", cfg, err)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"cert alone", "cluster:\n  tls:\n    cert: a.pem\n", "runtime.yaml:2: cluster.tls.key: required with the rest of cluster.tls"},
		{"no ca", "cluster:\n  tls:\n    cert: a.pem\n    key: k.pem\n", "runtime.yaml:2: cluster.tls.ca: required with the rest of cluster.tls"},
		{"no cert", "cluster:\n  tls:\n    key: k.pem\n    ca: ca.pem\n", "runtime.yaml:2: cluster.tls.cert: required"},
		{"NUL", "cluster:\n  tls:\n    cert: \"a\\0b\"\n    key: k.pem\n    ca: ca.pem\n", "runtime.yaml:3: cluster.tls.cert: contains a NUL byte"},
		{"unknown key", "cluster:\n  tls:\n    certificate: a.pem\n", "runtime.yaml:3: cluster.tls.certificate: unknown key"},
		{"not a mapping", "cluster:\n  tls: yes\n", "runtime.yaml:2: cluster.tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "runtime.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

// TestClusterTLSFiles: the files are read into mutual TLS with the CA's
// pool on both sides; a file that cannot serve is refused naming its
// line and key, and no key material is printed.
func TestClusterTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := clustertest.NewCA(t, "mirror test CA")
	cert, key, caFile := ca.Files(t, dir, "n1")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := clustertest.NewCA(t, "another CA")
	otherCert, otherKey := other.Issue(t, "n9")
	strangerCert := write("stranger.pem", otherCert)
	strangerKey := write("stranger-key.pem", otherKey)
	serverOnly, serverOnlyKey := ca.Issue(t, "n2", x509.ExtKeyUsageServerAuth)
	garbage := write("garbage.pem", []byte("not a pem file\n"))
	src := func(c, k, a string) []byte {
		return []byte("cluster:\n  tls:\n    cert: " + c + "\n    key: " + k + "\n    ca: " + a + "\n")
	}
	for _, tc := range []struct {
		name, cert, key, ca, want string
	}{
		{"good", cert, key, caFile, ""},
		{"relative to the data dir", "n1.pem", "n1-key.pem", "ca.pem", ""},
		{"cert missing", filepath.Join(dir, "nope.pem"), key, caFile, "runtime.yaml:3: cluster.tls.cert: cannot read"},
		{"cert not PEM", garbage, key, caFile, "runtime.yaml:3: cluster.tls.cert: the file holds no PEM certificate"},
		{"key not PEM", cert, garbage, caFile, "runtime.yaml:4: cluster.tls.key: the file holds no PEM private key"},
		{"key of another cert", cert, strangerKey, caFile, "runtime.yaml:4: cluster.tls.key: not the key of cluster.tls.cert's certificate"},
		{"ca not PEM", cert, key, garbage, "runtime.yaml:5: cluster.tls.ca: the file holds no PEM certificate"},
		{"cert of another CA", strangerCert, strangerKey, caFile, "runtime.yaml:3: cluster.tls.cert: not a certificate cluster.tls.ca signed"},
		{"server use only", write("server.pem", serverOnly), write("server-key.pem", serverOnlyKey), caFile, "for server and client use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(src(tc.cert, tc.key, tc.ca), "runtime.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := c.ClusterTLSConfig(dir)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%v, want %q", err, tc.want)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(otherKey[40:80])) {
					t.Fatalf("the error shows key material: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.RootCAs == nil || cfg.ClientCAs == nil || len(cfg.Certificates) != 1 || cfg.MinVersion < tls.VersionTLS12 {
				t.Fatalf("not mutual TLS with the CA: %+v", cfg)
			}
		})
	}
}
