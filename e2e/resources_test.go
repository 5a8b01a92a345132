package e2e

// Resources bounded, for everyone (issue 12, item 5): a time limit on every
// upstream statement that clients cannot lift, upstream statements
// cancelled when their client cancels or goes away, per-analyst limits on
// connections and private queries with a bounded wait, the upstream pool
// sized against the server, a guard before the parser, and portals with a
// row limit that stream.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/proxy"
)

// resourcesConfig (testconf.Resources) has two analysts, name_a and
// name_b, the slow private view of startLimited, and the limits (YAML
// lines under limits:).
func resourcesConfig(name, limits string) string {
	return testconf.Get(testconf.Resources).SetString(name+"_a", "auth", "users", "0", "name").
		SetString(name+"_b", "auth", "users", "1", "name").Merge(limits, "limits").String()
}

// resourcesProxy starts a proxy for analysts name_a and name_b (password
// "pw") with the given limits (YAML lines under limits:).
func resourcesProxy(t *testing.T, name, limits string, opts ...func(*proxy.Options)) string {
	t.Helper()
	if _, err := direct(t).Exec(ctx, slowViewSQL); err != nil {
		t.Fatal(err)
	}
	y := resourcesConfig(name, limits)
	cfg := configFor(t, y, map[string]string{"PW": "pw"})
	o := proxy.Options{Logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	srv, err := proxy.New(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// connectApp connects as user (password "pw") with an application_name,
// which the upstream session takes: pg_stat_activity tells it apart.
func connectApp(t *testing.T, addr, user, app string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:pw@%s/shop?sslmode=disable&application_name=%s", user, addr, app))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// rawApp is rawSession on a proxy at addr, with an application_name; it
// returns the client's socket too, to close it as a client that goes away.
func rawApp(t *testing.T, addr, user, app string) (*pgproto3.Frontend, net.Conn) {
	t.Helper()
	pc, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://%s:pw@%s/shop?sslmode=disable&application_name=%s", user, addr, app))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hc.Conn.Close() })
	return hc.Frontend, hc.Conn
}

// activeUpstream counts the upstream statements running for app.
func activeUpstream(t *testing.T, admin *pgx.Conn, app string) int {
	t.Helper()
	var n int
	err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND pid <> pg_backend_pid()`, app).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// endless is a pass-through statement that runs for hours and sends no
// row until it ends: 10^10 rows of a join of two short series (one
// series of that length is refused at analysis, rewrite.maxSeriesValues).
const endless = "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b"

// TestStatementTimeoutEveryStatement: a pass-through statement runs under
// limits.statement_timeout too, in both protocols; a client can SET a
// shorter timeout but neither a longer one nor 0 (which would disable it),
// by SET, SET LOCAL or as a startup parameter; RESET restores the limit.
func TestStatementTimeoutEveryStatement(t *testing.T) {
	addr := resourcesProxy(t, "res_timeout", "  statement_timeout: 500ms\n")
	for _, m := range attackModes {
		t.Run(m.name, func(t *testing.T) {
			conn := connectApp(t, addr, "res_timeout_a", "res_timeout", m.mode)
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := conn.Exec(cctx, endless)
			checkCode(t, endless, err, "57014")
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("pass-through statement ran %v under a 500ms limit", d)
			}
		})
	}
	conn := connectApp(t, addr, "res_timeout_a", "res_timeout", pgx.QueryExecModeSimpleProtocol)
	for _, sql := range []string{"SET statement_timeout = 0", "SET statement_timeout = '1h'", "SET statement_timeout = 501",
		"SET SESSION statement_timeout TO '0.1us'", "SET statement_timeout = '0x0'"} {
		_, err := conn.Exec(ctx, sql)
		checkCode(t, sql, err, "22023")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "SET LOCAL statement_timeout = 0")
	checkCode(t, "SET LOCAL statement_timeout = 0", err, "22023")
	tx.Rollback(ctx)
	show := func(want string) {
		t.Helper()
		var st string
		if err := conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&st); err != nil || st != want {
			t.Errorf("SHOW statement_timeout = %q (%v), want %q", st, err, want)
		}
	}
	show("500ms")
	if _, err := conn.Exec(ctx, "SET statement_timeout = 100"); err != nil {
		t.Fatalf("a shorter timeout: %v", err)
	}
	show("100ms")
	if _, err := conn.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
	show("500ms")

	// Startup parameters, plain and in options.
	for _, params := range []string{"statement_timeout=0", "options=-c%20statement_timeout%3D0", "options=--statement_timeout%3D10min"} {
		c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://res_timeout_a:pw@%s/shop?sslmode=disable&%s", addr, params))
		if err == nil {
			c.Close(ctx)
		}
		checkCode(t, "startup "+params, err, "22023")
	}
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://res_timeout_a:pw@%s/shop?sslmode=disable&statement_timeout=200", addr))
	if err != nil {
		t.Fatalf("a shorter startup statement_timeout: %v", err)
	}
	defer c.Close(ctx)
	var st string
	if err := c.QueryRow(ctx, "SHOW statement_timeout").Scan(&st); err != nil || st != "200ms" {
		t.Errorf("startup statement_timeout=200: SHOW = %q (%v)", st, err)
	}
}

// TestDisconnectCancelsUpstream: a client that goes away while its
// statement runs gets the statement cancelled upstream, for pass-through
// statements in both protocols and for private queries; the statement
// would otherwise run to its statement_timeout (a minute here).
func TestDisconnectCancelsUpstream(t *testing.T) {
	addr := resourcesProxy(t, "res_gone", "  statement_timeout: 1m\n")
	admin := direct(t)
	cases := []struct {
		name string
		send func(fe *pgproto3.Frontend)
	}{
		{"pass-through simple", func(fe *pgproto3.Frontend) { fe.Send(&pgproto3.Query{String: endless}) }},
		{"pass-through extended", func(fe *pgproto3.Frontend) {
			fe.Send(&pgproto3.Parse{Query: endless})
			fe.Send(&pgproto3.Bind{})
			fe.Send(&pgproto3.Execute{})
			fe.Send(&pgproto3.Sync{})
		}},
		{"pass-through with a row limit", func(fe *pgproto3.Frontend) {
			fe.Send(&pgproto3.Parse{Query: endless})
			fe.Send(&pgproto3.Bind{})
			fe.Send(&pgproto3.Execute{MaxRows: 10})
			fe.Send(&pgproto3.Flush{})
		}},
		{"private", func(fe *pgproto3.Frontend) { fe.Send(&pgproto3.Query{String: "SELECT count(*) FROM dp_slow_orders"}) }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := fmt.Sprintf("res_gone_%d", i)
			fe, sock := rawApp(t, addr, "res_gone_a", app)
			c.send(fe)
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the statement never ran upstream", func() error {
				if activeUpstream(t, admin, app) == 0 {
					return errors.New("not active")
				}
				return nil
			})
			sock.Close()
			start := time.Now()
			eventually(t, 15*time.Second, "the statement still runs upstream after its client left", func() error {
				if n := activeUpstream(t, admin, app); n > 0 {
					return fmt.Errorf("%d active after %v", n, time.Since(start))
				}
				return nil
			})
		})
	}
}

// TestCancelRequestEndsWaits: a CancelRequest ends a private query that
// waits for a slot at once (57014), rather than when a slot frees, and
// cancels a pass-through statement upstream.
func TestCancelRequestEndsWaits(t *testing.T) {
	addr := resourcesProxy(t, "res_cancel", "  statement_timeout: 1m\n  max_concurrent_private_queries: 1\n  private_query_wait: 1m\n")
	admin := direct(t)
	holder := connectApp(t, addr, "res_cancel_a", "res_cancel_holder", pgx.QueryExecModeSimpleProtocol)
	held := make(chan error, 1)
	go func() {
		var n int64
		held <- holder.QueryRow(ctx, "SELECT count(*) FROM dp_slow_orders").Scan(&n)
	}()
	eventually(t, 10*time.Second, "the slow private query never ran", func() error {
		if activeUpstream(t, admin, "res_cancel_holder") == 0 {
			return errors.New("not active")
		}
		return nil
	})
	for _, m := range attackModes {
		t.Run("waiting "+m.name, func(t *testing.T) {
			waiter := connectApp(t, addr, "res_cancel_b", "res_cancel_waiter", m.mode)
			before := showBudget(t, waiter)
			go func() {
				time.Sleep(300 * time.Millisecond)
				if err := waiter.PgConn().CancelRequest(ctx); err != nil {
					t.Errorf("CancelRequest: %v", err)
				}
			}()
			start := time.Now()
			var n int64
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err := waiter.QueryRow(cctx, "SELECT count(*) FROM orders").Scan(&n)
			checkCode(t, "a private query waiting for a slot, cancelled", err, "57014")
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the cancelled wait ended after %v", d)
			}
			if after := showBudget(t, waiter); after != before {
				t.Errorf("a query cancelled before its slot was charged: %+v -> %+v", before, after)
			}
		})
	}
	t.Run("pass-through", func(t *testing.T) {
		conn := connectApp(t, addr, "res_cancel_b", "res_cancel_pt", pgx.QueryExecModeSimpleProtocol)
		watch := direct(t) // the test's goroutine keeps admin
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				var n int
				err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'res_cancel_pt' AND state = 'active'`).Scan(&n)
				if err != nil || n > 0 {
					break
				}
			}
			conn.PgConn().CancelRequest(ctx)
		}()
		_, err := conn.Exec(ctx, endless)
		checkCode(t, endless, err, "57014")
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Errorf("session unusable after the cancel: %v", err)
		}
	})
	holder.PgConn().CancelRequest(ctx)
	<-held
}

// TestCancelEndsClaimWait: a private query waiting on the ledger for
// another session of its analyst asking the same question (its claim,
// proxy/answer.go) stops waiting when its client cancels or goes away, at
// the end of its time slot (proxy/clock.go): refused with 57014 and
// uncharged, rather than when the first query ends (privacy.max_query_time
// here, 30 s).
func TestCancelEndsClaimWait(t *testing.T) {
	addr := resourcesProxy(t, "res_claim", "  statement_timeout: 1m\n")
	admin := direct(t)
	const question = "SELECT count(*) FROM dp_slow_orders WHERE amount >= 7"
	holder := connectApp(t, addr, "res_claim_a", "res_claim_holder", pgx.QueryExecModeSimpleProtocol)
	held := make(chan error, 1)
	// The holder must own the claim before the waiters ask: it is charged
	// after it claims and before its slow run, so wait for the charge
	// (seeing its upstream active is not enough: that may be a check
	// before the claim, and a waiter that claims first is not waiting).
	probe := connectApp(t, addr, "res_claim_a", "res_claim_probe", pgx.QueryExecModeSimpleProtocol)
	unspent := showBudget(t, probe)
	go func() {
		var n int64
		held <- holder.QueryRow(ctx, question).Scan(&n)
	}()
	eventually(t, 10*time.Second, "the slow private query never ran", func() error {
		if activeUpstream(t, admin, "res_claim_holder") == 0 || showBudget(t, probe) == unspent {
			return errors.New("not charged and running yet")
		}
		return nil
	})
	// claimWaits counts the ledger's sessions waiting for a question's
	// advisory lock.
	claimWaits := func(c *pgx.Conn) (int, error) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dpproxy-ledger' AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_lock%'`).Scan(&n)
		return n, err
	}
	t.Run("CancelRequest", func(t *testing.T) {
		waiter := connectApp(t, addr, "res_claim_a", "res_claim_waiter", pgx.QueryExecModeSimpleProtocol)
		before := showBudget(t, waiter)
		watch := direct(t) // the test's goroutine keeps admin
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if n, err := claimWaits(watch); err != nil || n > 0 {
					break
				}
			}
			if err := waiter.PgConn().CancelRequest(ctx); err != nil {
				t.Errorf("CancelRequest: %v", err)
			}
		}()
		start := time.Now()
		var n int64
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := waiter.QueryRow(cctx, question).Scan(&n)
		checkCode(t, "a private query waiting on the claim, cancelled", err, "57014")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the cancelled wait ended after %v", d)
		}
		if after := showBudget(t, waiter); after != before {
			t.Errorf("a query cancelled while it waited on the claim was charged: %+v -> %+v", before, after)
		}
		if n, err := claimWaits(admin); err != nil || n != 0 {
			t.Errorf("%d waits for the claim left after the cancel (%v)", n, err)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		fe, sock := rawApp(t, addr, "res_claim_a", "res_claim_gone")
		fe.Send(&pgproto3.Query{String: question})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the second asker never waited on the claim", func() error {
			if n, err := claimWaits(admin); err != nil || n == 0 {
				return fmt.Errorf("%d waits for the claim (%v)", n, err)
			}
			return nil
		})
		sock.Close()
		eventually(t, 10*time.Second, "the wait for the claim goes on after its client left", func() error {
			if n, err := claimWaits(admin); err != nil || n > 0 {
				return fmt.Errorf("%d waits for the claim (%v)", n, err)
			}
			return nil
		})
	})
	holder.PgConn().CancelRequest(ctx)
	<-held
}

// TestPrivateSlotsPerAnalyst: one analyst holding its share of the
// private-query slots cannot make another analyst wait; its own next
// query waits limits.private_query_wait at most and is refused with 57014,
// uncharged.
func TestPrivateSlotsPerAnalyst(t *testing.T) {
	addr := resourcesProxy(t, "res_slots", "  statement_timeout: 1m\n  max_concurrent_private_queries: 2\n  max_concurrent_private_queries_per_analyst: 1\n  private_query_wait: 500ms\n")
	admin := direct(t)
	hog := connectApp(t, addr, "res_slots_a", "res_slots_hog", pgx.QueryExecModeSimpleProtocol)
	held := make(chan error, 1)
	go func() {
		var n int64
		held <- hog.QueryRow(ctx, "SELECT count(*) FROM dp_slow_orders").Scan(&n)
	}()
	eventually(t, 10*time.Second, "the slow private query never ran", func() error {
		if activeUpstream(t, admin, "res_slots_hog") == 0 {
			return errors.New("not active")
		}
		return nil
	})
	again := connectApp(t, addr, "res_slots_a", "res_slots_again", pgx.QueryExecModeSimpleProtocol)
	before := showBudget(t, again)
	start := time.Now()
	var n int64
	err := again.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n)
	checkCode(t, "a second private query of the same analyst", err, "57014")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !strings.Contains(pgErr.Message, "max_concurrent_private_queries_per_analyst") {
		t.Errorf("refusal does not name the limit: %s", pgErr.Message)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("refused after %v, without waiting private_query_wait", d)
	}
	if after := showBudget(t, again); after != before {
		t.Errorf("a query refused for want of a slot was charged: %+v -> %+v", before, after)
	}
	other := connectApp(t, addr, "res_slots_b", "res_slots_other", pgx.QueryExecModeSimpleProtocol)
	if err := other.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
		t.Errorf("another analyst's count while the first holds its slots: %v", err)
	}
	hog.PgConn().CancelRequest(ctx)
	<-held
}

// TestConnectionsPerAnalyst: limits.max_connections_per_analyst refuses an
// analyst's next session with 53300, not another analyst's, and frees the
// slot when a session ends.
func TestConnectionsPerAnalyst(t *testing.T) {
	addr := resourcesProxy(t, "res_conns", "  max_connections_per_analyst: 2\n")
	a1 := connectAt(t, addr, "res_conns_a", "pw", pgx.QueryExecModeSimpleProtocol)
	connectAt(t, addr, "res_conns_a", "pw", pgx.QueryExecModeSimpleProtocol)
	_, err := dialAt(addr, "res_conns_a", "pw")
	checkCode(t, "a third session of one analyst", err, "53300")
	connectAt(t, addr, "res_conns_b", "pw", pgx.QueryExecModeSimpleProtocol)
	a1.Close(ctx)
	eventually(t, 5*time.Second, "no slot after the analyst's session left", dialsOK(addr, "res_conns_a", "pw"))
}

// logBuffer collects a proxy's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPoolSizedToServer: a proxy whose limits.max_connections (plus the
// ledger's pool) exceeds what the upstream server accepts (300 in the
// tests) lowers it at start, with a warning, and still serves;
// check-config says so.
func TestPoolSizedToServer(t *testing.T) {
	var log logBuffer
	addr := resourcesProxy(t, "res_pool", "  max_connections: 5000\n", func(o *proxy.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if !strings.Contains(log.String(), "limits.max_connections lowered") {
		t.Errorf("no warning at start that max_connections 5000 does not fit the upstream; log:\n%s", log.String())
	}
	connectAt(t, addr, "res_pool_a", "pw", pgx.QueryExecModeSimpleProtocol)

	y := resourcesConfig("res_pool", "  max_connections: 5000\n")
	report, _ := proxy.CheckSchema(ctx, configFor(t, y, map[string]string{"PW": "pw"}))
	if r := strings.Join(report, "\n"); !strings.Contains(r, "warning: limits.max_connections") {
		t.Errorf("check-config does not warn that max_connections 5000 does not fit:\n%s", r)
	}
}

// TestDeepExpressionsRefused: texts that crashed pg_query's C parser, or
// the analysis after it, and killed every session (a chain of 25,000
// terms; 5,000 were enough), or took tens of seconds (1 MB of IN list),
// are refused with 54001/54000 by the guard before the parser, in both
// protocols, and the proxy (a process of its own here) lives on.
func TestDeepExpressionsRefused(t *testing.T) {
	p := startProc(t, buildDpproxy(t), "res_deep", 100)
	texts := []struct {
		name, sql, code string
	}{
		{"25,000 terms", "SELECT 1" + strings.Repeat("+1", 25_000), "54001"},
		{"5,000 terms", "SELECT 1" + strings.Repeat("+1", 5_000), "54001"},
		{"casts", "SELECT 1" + strings.Repeat("::int", 5_000), "54001"},
		{"unions", "SELECT 1" + strings.Repeat(" UNION SELECT 1", 3_000), "54001"},
		{"private chain", "SELECT sum(amount" + strings.Repeat(" + amount", 5_000) + ") FROM orders", "54001"},
		{"parentheses", "SELECT " + strings.Repeat("(", 20_000) + "1" + strings.Repeat(")", 20_000), "54001"},
		{"subqueries", "SELECT " + strings.Repeat("(SELECT ", 2_000) + "1" + strings.Repeat(")", 2_000), "54001"},
		{"1 MB IN list", "SELECT 1 IN (1" + strings.Repeat(",1", 500_000) + ")", "54000"},
	}
	for _, m := range attackModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			conn := connectAt(t, p.addr, "res_deep", procPassword, m.mode)
			for _, x := range texts {
				_, err := conn.Exec(ctx, x.sql)
				checkCode(t, x.name, err, x.code)
				select {
				case <-p.exited:
					t.Fatalf("%s: the proxy died: %s", x.name, p.log())
				default:
				}
			}
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1+1+1").Scan(&one); err != nil || one != 3 {
				t.Errorf("session after the refusals: %d, %v", one, err)
			}
		})
	}
}

// TestPortalRowLimitStreams: Execute with a row limit on a pass-through
// portal streams from a suspended upstream portal: the first rows of a
// result of three million come back while the proxy holds no more than a
// batch (the heap grows by far less than the result's size, about 400 MB
// when it was collected), later Executes continue where the last stopped,
// inside a transaction block the portal outlives other statements, and
// outside one a portal whose upstream twin another statement ended is
// refused rather than answered wrongly.
func TestPortalRowLimitStreams(t *testing.T) {
	addr := resourcesProxy(t, "res_portal", "  statement_timeout: 1m\n")
	fe, _ := rawApp(t, addr, "res_portal_a", "res_portal")
	const big = "SELECT g FROM generate_series(1, 3000000) g"
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	fe.Send(&pgproto3.Parse{Query: big})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{MaxRows: 100})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	rows := readBatch(t, fe, "ParseComplete BindComplete", 100, "PortalSuspended")
	if grown := int64(heap()) - int64(before); grown > 32<<20 {
		t.Errorf("the proxy's heap grew by %d MB for a batch of 100 rows", grown>>20)
	}
	if rows[0] != "1" || rows[99] != "100" {
		t.Errorf("first batch: %s ... %s", rows[0], rows[99])
	}
	fe.Send(&pgproto3.Execute{MaxRows: 100})
	fe.Send(&pgproto3.Flush{})
	fe.Flush()
	if rows := readBatch(t, fe, "", 100, "PortalSuspended"); rows[0] != "101" || rows[99] != "200" {
		t.Errorf("second batch: %s ... %s", rows[0], rows[99])
	}
	fe.Send(&pgproto3.Close{ObjectType: 'P'})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "CloseComplete ReadyForQuery" {
		t.Errorf("closing the portal: %s", got)
	}

	// In a transaction block the portal survives Sync and other statements.
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Parse{Name: "s", Query: "SELECT g FROM generate_series(1, 10) g"})
	fe.Send(&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s"})
	fe.Send(&pgproto3.Execute{Portal: "p", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	receiveUntilReady(t, fe) // BEGIN
	if rows := readBatch(t, fe, "ParseComplete BindComplete", 3, "PortalSuspended"); rows[2] != "3" {
		t.Errorf("in a transaction, first batch ends with %s", rows[2])
	}
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Query{String: "SELECT 1"})
	fe.Flush()
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Execute{Portal: "p", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	if rows := readBatch(t, fe, "", 3, "PortalSuspended"); rows[0] != "4" {
		t.Errorf("in a transaction, after another statement, the batch starts with %s, want 4", rows[0])
	}
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Execute{Portal: "p"})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	if rows := readBatch(t, fe, "", 4, "CommandComplete"); rows[3] != "10" {
		t.Errorf("the rest of the portal ends with %s", rows[3])
	}
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	fe.Flush()
	receiveUntilReady(t, fe)

	// pgJDBC's fetch size: a cursor on the unnamed statement, fetched
	// while other statements re-parse the unnamed statement; the running
	// portal outlives it, as on PostgreSQL.
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Parse{Query: "SELECT g FROM generate_series(1, 10) g"})
	fe.Send(&pgproto3.Bind{DestinationPortal: "C_1"})
	fe.Send(&pgproto3.Execute{Portal: "C_1", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Parse{Query: "SELECT 1"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Execute{Portal: "C_1", MaxRows: 3})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	receiveUntilReady(t, fe) // BEGIN
	readBatch(t, fe, "ParseComplete BindComplete", 3, "PortalSuspended")
	receiveUntilReady(t, fe)
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "ParseComplete BindComplete DataRow CommandComplete ReadyForQuery" {
		t.Errorf("a statement between fetches: %s", got)
	}
	if rows := readBatch(t, fe, "", 3, "PortalSuspended"); rows[0] != "4" {
		t.Errorf("the cursor after the unnamed statement was re-parsed starts with %s, want 4", rows[0])
	}
	receiveUntilReady(t, fe)
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	fe.Flush()
	receiveUntilReady(t, fe)

	// Outside one, a Parse that needs the upstream ends the suspended
	// portal: executing it again is refused.
	fe.Send(&pgproto3.Bind{DestinationPortal: "q", PreparedStatement: "s"})
	fe.Send(&pgproto3.Execute{Portal: "q", MaxRows: 2})
	fe.Send(&pgproto3.Parse{Name: "t", Query: "SELECT 2"})
	fe.Send(&pgproto3.Execute{Portal: "q", MaxRows: 2})
	fe.Send(&pgproto3.Sync{})
	fe.Flush()
	got := strings.Join(receiveUntilReady(t, fe), " ")
	if want := "BindComplete DataRow DataRow PortalSuspended ParseComplete ErrorResponse:0A000 ReadyForQuery"; got != want {
		t.Errorf("a portal lost upstream:\n got %s\nwant %s", got, want)
	}
	fe.Send(&pgproto3.Query{String: "SELECT 1"})
	fe.Flush()
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "RowDescription DataRow CommandComplete ReadyForQuery" {
		t.Errorf("session after: %s", got)
	}
}

// readBatch reads the messages named by prefix (space-separated), then n
// rows of one column, then the message end; it returns the rows' texts.
func readBatch(t *testing.T, fe *pgproto3.Frontend, prefix string, n int, end string) []string {
	t.Helper()
	for _, want := range strings.Fields(prefix) {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3."); got != want {
			t.Fatalf("got %s (%+v), want %s", got, msg, want)
		}
	}
	var rows []string
	for len(rows) < n {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		r, ok := msg.(*pgproto3.DataRow)
		if !ok {
			t.Fatalf("after %d rows: %T %+v, want DataRow", len(rows), msg, msg)
		}
		rows = append(rows, string(r.Values[0]))
	}
	msg, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3."); got != end {
		t.Fatalf("after %d rows: %s, want %s", n, got, end)
	}
	return rows
}
