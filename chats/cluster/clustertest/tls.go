package clustertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, in memory: the
// certificates it issues name 127.0.0.1 and localhost, for both server
// and client use, as cluster.tls needs.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the CA's certificate
	next int64
}

// NewCA makes a CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), next: 2}
}

// Issue returns a certificate and its key (PEM) for cn, signed by the CA,
// for the given extended uses (server and client when none given).
func (ca *CA) Issue(tb testing.TB, cn string, uses ...x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	tb.Helper()
	if len(uses) == 0 {
		uses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	ca.next++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.next),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  uses,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// Files writes the CA's certificate and a certificate of cn with its key
// to dir (ca.pem, CN.pem, CN-key.pem) and returns their paths.
func (ca *CA) Files(tb testing.TB, dir, cn string) (cert, key, caFile string) {
	tb.Helper()
	c, k := ca.Issue(tb, cn)
	cert, key, caFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem"), filepath.Join(dir, "ca.pem")
	for p, b := range map[string][]byte{cert: c, key: k, caFile: ca.PEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return cert, key, caFile
}
