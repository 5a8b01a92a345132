package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/testconf"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSAndMD5(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	cfg := configFor(t, testconf.Get(testconf.TLS).SetString(cert, "tls", "cert").SetString(key, "tls", "key").String(), map[string]string{"PW": "dave-secret"})
	_, addr, _ := startProxyWith(t, cfg)
	host, port, _ := net.SplitHostPort(addr)
	base := fmt.Sprintf("postgres://tls_dave:dave-secret@%s:%s/shop", host, port)
	for _, mode := range []string{"require", "verify-full&sslrootcert=" + cert, "prefer"} {
		t.Run(strings.Split(mode, "&")[0], func(t *testing.T) {
			conn, err := pgx.Connect(ctx, base+"?sslmode="+mode)
			if err != nil {
				t.Fatalf("connect with sslmode=%s: %v", mode, err)
			}
			defer conn.Close(ctx)
			if !isTLS(conn) {
				t.Errorf("sslmode=%s: connection is not encrypted", mode)
			}
			var n int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE amount > $1", 5).Scan(&n); err != nil {
				t.Errorf("DP query over TLS: %v", err)
			}
		})
	}
	// verify-full against another CA fails: the client checks the proxy.
	otherCert, _ := selfSigned(t, t.TempDir())
	if c, err := pgx.Connect(ctx, base+"?sslmode=verify-full&sslrootcert="+otherCert); err == nil {
		c.Close(ctx)
		t.Errorf("verify-full accepted a certificate from an unknown CA")
	}
	// Wrong password under md5: 28P01.
	_, err := pgx.Connect(ctx, fmt.Sprintf("postgres://tls_dave:nope@%s:%s/shop?sslmode=require", host, port))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Errorf("md5 with a wrong password: %v, want 28P01", err)
	}
}

func TestNoTLSConfiguredAnswersN(t *testing.T) {
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	_, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice:%s@%s:%s/shop?sslmode=require", pwAlice, host, port))
	if err == nil || !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "SSL") && !strings.Contains(err.Error(), "TLS") {
		t.Errorf("sslmode=require without tls configured: err = %v, want a refusal of TLS", err)
	}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://alice:%s@%s:%s/shop?sslmode=prefer", pwAlice, host, port))
	if err != nil {
		t.Fatalf("sslmode=prefer falls back to plain text: %v", err)
	}
	conn.Close(ctx)
}

func isTLS(conn *pgx.Conn) bool {
	_, ok := conn.PgConn().Conn().(*tls.Conn)
	return ok
}
