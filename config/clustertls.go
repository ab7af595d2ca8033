package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ClusterTLS is mutual TLS between the nodes of a cluster: every route
// between the embedded NATS servers (and every client of their client
// port, and this node's connection to an external NATS) presents a
// certificate signed by CA and accepts only peers that do. Files, in PEM;
// a relative path is relative to the data dir. All three or none.
type ClusterTLS struct {
	// Cert is this node's certificate (chain): for both server and
	// client authentication, naming the host its peers reach its routes
	// at (a DNS or IP subject alternative name).
	Cert string `yaml:"cert"`
	// Key is Cert's private key.
	Key string `yaml:"key"`
	// CA is the certificate(s) of the authority every node's
	// certificate is signed by; peers without one are refused.
	CA string `yaml:"ca"`
}

// set says any of the three keys is given.
func (t ClusterTLS) set() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

func (v *validator) clusterTLS() {
	t := v.c.Cluster.TLS
	if !t.set() {
		return
	}
	for _, k := range []struct{ field, val, what string }{
		{"cluster.tls.cert", t.Cert, "this node's certificate file (PEM)"},
		{"cluster.tls.key", t.Key, "the certificate's private key file (PEM)"},
		{"cluster.tls.ca", t.CA, "the file of the CA every node's certificate is signed by (PEM)"},
	} {
		switch {
		case k.val == "":
			v.fail(k.field, "required with the rest of cluster.tls: %s", k.what)
		case strings.ContainsRune(k.val, 0):
			v.fail(k.field, "contains a NUL byte")
		}
	}
}

// ClusterTLSConfig reads cluster.tls's files (relative paths against
// dataDir) into the TLS setting of the cluster's connections: this
// node's certificate, the CA's pool both to verify servers and to
// require and verify clients' certificates. nil, nil when cluster.tls is
// not set. A file that cannot be read or is not what its key needs is a
// runtime.yaml:LINE: cluster.tls.KEY: error; no key material is printed.
func (c *Config) ClusterTLSConfig(dataDir string) (*tls.Config, error) {
	t := c.Cluster.TLS
	if !t.set() {
		return nil, nil
	}
	fail := func(field, format string, args ...any) error {
		file := c.file
		if file == "" {
			file = DefaultFile
		}
		return &Error{File: file, Line: c.line(field), Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	path := func(p string) string {
		if filepath.IsAbs(p) || dataDir == "" {
			return p
		}
		return filepath.Join(dataDir, p)
	}
	read := func(field, p string) ([]byte, error) {
		b, err := os.ReadFile(path(p))
		if err != nil {
			return nil, fail(field, "cannot read %s: %v", show(p), unwrapPath(err))
		}
		return b, nil
	}
	certPEM, err := read("cluster.tls.cert", t.Cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("cluster.tls.key", t.Key)
	if err != nil {
		return nil, err
	}
	caPEM, err := read("cluster.tls.ca", t.CA)
	if err != nil {
		return nil, err
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, fail("cluster.tls.cert", "the file holds no PEM certificate")
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
		return nil, fail("cluster.tls.key", "the file holds no PEM private key")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error of X509KeyPair says what does not match, never
		// the key itself.
		return nil, fail("cluster.tls.key", "not the key of cluster.tls.cert's certificate: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fail("cluster.tls.ca", "the file holds no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fail("cluster.tls.cert", "%v", err)
	}
	cert.Leaf = leaf
	// Each node is both the server and the client of a route: a
	// certificate the peers would refuse is said now, not as a route
	// that never forms.
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		inter := x509.NewCertPool()
		for _, der := range cert.Certificate[1:] {
			if c, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(c)
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			return nil, fail("cluster.tls.cert", "not a certificate cluster.tls.ca signed for server and client use: %v", err)
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// unwrapPath is a file error without the path it repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
