package e2e

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/proxy"
)

// startProxy runs another proxy on the shared configuration (for tests that
// stop it). It returns the server, its address and the result of Serve.
func startProxy(t *testing.T) (*proxy.Server, string, chan error) {
	t.Helper()
	return startProxyWith(t, env.cfg)
}

// configFor parses a test configuration: its "upstream: UPSTREAM" line
// becomes the test database's query and ledger roles (upstreams),
// password_env names are looked up in passwords. Tests that need
// analysts or tables of their own use it with startProxyWith, and pick
// analyst names no other test uses (budgets live in the shared ledger).
func configFor(t *testing.T, yaml string, passwords map[string]string) *conf.Config {
	t.Helper()
	cfg, err := conf.Parse(t.Name()+".yaml", []byte(upstreams(yaml)), func(k string) string { return passwords[k] })
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return cfg
}

// startProxyWith runs a proxy in-process on cfg, on 127.0.0.1:0. It is
// shut down when the test ends.
func startProxyWith(t *testing.T, cfg *conf.Config) (*proxy.Server, string, chan error) {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() { ln.Close() })
	return srv, ln.Addr().String(), done
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dialAt connects with the simple protocol to a proxy at addr.
func dialAt(addr, user, password string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s/shop?sslmode=disable", user, password, addr))
	if err != nil {
		return nil, err
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cc)
}

// eventually calls try until it returns nil, failing the test with what
// and try's last error if that takes longer than within.
func eventually(t *testing.T, within time.Duration, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dialsOK is a try for eventually: a connection is accepted (and closed).
func dialsOK(addr, user, password string) func() error {
	return func() error {
		c, err := dialAt(addr, user, password)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
}
