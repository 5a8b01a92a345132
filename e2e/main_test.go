// Package e2e tests dpproxy end to end: a real PostgreSQL (throwaway, or
// DPPROXY_TEST_UPSTREAM), the demo dataset, the proxy in-process on
// 127.0.0.1:0, and clients speaking the wire protocol through it.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/proxy"
)

// env is what TestMain set up; tests only read it.
var env struct {
	// upstream connects to the test database as the superuser: for tests
	// that set up or verify, never for a proxy.
	upstream string
	// roles are the proxies' two upstream roles (docs/operations.md): the
	// query role reads every table the superuser creates in the test
	// database and can create nothing; the ledger role owns schema
	// dpproxy. Configurations get them through upstreams.
	roles     *demo.Roles
	proxyAddr string
	cfg       *conf.Config
}

// Analysts of the test configuration, with their passwords and budgets.
const (
	pwAlice = "alice-secret"
	pwBob   = "bob-secret"
	pwCarol = "carol-secret"
)

// testConfig is the shared proxy's configuration (testconf.E2E in
// internal/testconf/dpproxy.yaml): the analysts above, the privacy
// settings, and the tables of shopTables.
var testConfig = testconf.YAML(testconf.E2E)

// shopTables configures the demo dataset's tables as most tests use them
// (testconf.E2ETables): a tables section that tests may extend with
// entries of their own.
var shopTables = testconf.YAML(testconf.E2ETables)

func TestMain(m *testing.M) {
	pgtest.Main(m, func(admin string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		db, err := freshDatabase(ctx, admin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		env.upstream = db
		if env.roles, err = testRoles(ctx, db); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer dropDatabase(admin, db, env.roles)
		if err := demo.Load(ctx, db); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		pw := map[string]string{"E2E_PW_ALICE": pwAlice, "E2E_PW_BOB": pwBob, "E2E_PW_CAROL": pwCarol}
		cfg, err := conf.Parse("e2e.yaml", []byte(upstreams(testConfig)), func(k string) string { return pw[k] })
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		env.cfg = cfg
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn + 4}))
		if os.Getenv("DPPROXY_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: logger})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: proxy:", err)
			return 1
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		env.proxyAddr = ln.Addr().String()
		go srv.Serve(ln)
		code := m.Run()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		srv.Close()
		return code
	})
}

// freshDatabase creates a database of its own on the server at admin, so
// that a shared DPPROXY_TEST_UPSTREAM is never polluted, and returns its URL.
func freshDatabase(ctx context.Context, admin string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(admin), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	name := "dpproxy_e2e_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// testRoles creates the proxies' query and ledger roles in the test
// database at db (demo.CreateRoles), named after the database so that runs
// sharing a DPPROXY_TEST_UPSTREAM never meet. Tests create tables as the
// superuser and configure them, so the query role may read every table and
// schema the superuser creates here from now on (default privileges); it
// still creates nothing, and cannot reach schema dpproxy.
func testRoles(ctx context.Context, db string) (*demo.Roles, error) {
	u, err := url.Parse(db)
	if err != nil {
		return nil, err
	}
	r, err := demo.CreateRoles(ctx, db, strings.TrimPrefix(u.Path, "/"), nil)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	q := pgx.Identifier{r.QueryRole}.Sanitize()
	_, err = conn.Exec(ctx, "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO "+q+"; ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO "+q)
	return r, err
}

// dropDatabase removes the test database db and its roles through admin,
// which matters on a shared DPPROXY_TEST_UPSTREAM.
func dropDatabase(admin, db string, r *demo.Roles) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(db)
	if err != nil {
		return
	}
	name := strings.TrimPrefix(u.Path, "/")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: dropping the test database:", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: dropping the test database:", err)
		return
	}
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r.QueryRole}.Sanitize()+", "+pgx.Identifier{r.LedgerRole}.Sanitize()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: dropping the test roles:", err)
	}
}

// clientDatabases: clients connect to the test database (a fresh name
// each run) as "shop", the demo's name.
const clientDatabases = "\ndatabases: [shop]"

// upstreams fills in a test configuration's "upstream: UPSTREAM" line
// with the query role's URL, and adds ledger_upstream with the ledger
// role's: every proxy in the tests runs with two roles, as in production.
func upstreams(yaml string) string {
	return strings.Replace(yaml, "upstream: UPSTREAM",
		"upstream: "+env.roles.QueryURL+"\nledger_upstream: "+env.roles.LedgerURL+clientDatabases, 1)
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "the upstream"
}

// connect opens a simple-protocol connection through the proxy.
func connect(t testing.TB, user, password string) *pgx.Conn {
	t.Helper()
	conn, err := dial(user, password)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func dial(user, password string) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:%s/shop?sslmode=disable", user, url.QueryEscape(password), host, port))
	if err != nil {
		return nil, err
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pgx.ConnectConfig(ctx, cc)
}

// direct opens a connection straight to the test database (the truth).
func direct(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
