package e2e

// Transaction pooling (issue 17, item 2): many sessions share a few
// backends, and each keeps its own settings and prepared statements.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/proxy"
)

// poolProxy starts a proxy for analysts name_a and name_b (password "pw",
// testconf.Resources) in transaction mode with max_backends backends and
// the given further limits, private answers on a 1ms clock.
func poolProxy(t *testing.T, name string, maxBackends int, limits string) string {
	t.Helper()
	return poolProxyWith(t, name, maxBackends, limits, "response_quantum: 1ms")
}

// poolProxyWith is poolProxy with the given privacy keys.
func poolProxyWith(t *testing.T, name string, maxBackends int, limits, privacy string) string {
	t.Helper()
	if _, err := direct(t).Exec(ctx, slowViewSQL); err != nil {
		t.Fatal(err)
	}
	y := testconf.Get(testconf.Resources).SetString(name+"_a", "auth", "users", "0", "name").
		SetString(name+"_b", "auth", "users", "1", "name").
		Merge(fmt.Sprintf("pool: {mode: transaction, max_backends: %d}\n%s", maxBackends, limits), "limits").
		Merge(privacy, "privacy").String()
	cfg := configFor(t, y, map[string]string{"PW": "pw"})
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
	go srv.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// backendsLike counts the upstream backends whose application_name is
// LIKE pattern.
func backendsLike(admin *pgx.Conn, pattern string) (int, error) {
	var n int
	err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1", pattern).Scan(&n)
	return n, err
}

// TestPoolSharesBackends: 30 clients, in the simple protocol, with named
// prepared statements and with unnamed ones, run SETs, prepared
// statements, transaction blocks and private queries at once through a
// proxy with 3 backends. Each sees its own settings and right results
// throughout, and PostgreSQL never has more than 3 backends of theirs.
func TestPoolSharesBackends(t *testing.T) {
	const clients, rounds, backends = 30, 6, 3
	addr := poolProxy(t, "pool_mix", backends, "max_connections_per_analyst: 20")
	admin := direct(t)

	// Every backend of this proxy has served one of these clients (each
	// session sets its application_name there), and no other has.
	var maxSeen atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		sampler, err := pgx.Connect(context.Background(), env.upstream)
		if err != nil {
			sampled <- err
			return
		}
		defer sampler.Close(context.Background())
		for {
			n, err := backendsLike(sampler, "pool_mix_%")
			if err != nil {
				sampled <- err
				return
			}
			if int64(n) > maxSeen.Load() {
				maxSeen.Store(int64(n))
			}
			select {
			case <-stop:
				sampled <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec}
	styles := []string{"ISO, MDY", "SQL, DMY", "German, DMY", "Postgres, MDY", "ISO, DMY"}
	var wg sync.WaitGroup
	conns := make([]*pgx.Conn, clients)
	for i := range clients {
		user := "pool_mix_a"
		if i%2 == 1 {
			user = "pool_mix_b"
		}
		conns[i] = connectApp(t, addr, user, fmt.Sprintf("pool_mix_%d", i), modes[i%len(modes)])
	}
	for i := range clients {
		wg.Go(func() {
			if err := poolClient(conns[i], i, rounds, styles[i%len(styles)]); err != nil {
				t.Errorf("client %d (%v): %v", i, modes[i%len(modes)], err)
				// A block left open would hold its backend.
				conns[i].Close(context.Background())
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	n, err := backendsLike(admin, "pool_mix_%")
	if err != nil {
		t.Fatal(err)
	}
	if m := maxSeen.Load(); m > backends || n > backends || n < 1 {
		t.Errorf("backends of the 30 clients: at most %d seen while they ran, %d at the end; want between 1 and %d", m, n, backends)
	}
	t.Logf("%d clients on at most %d backends (%d at the end)", clients, maxSeen.Load(), n)
}

// poolClient is one client of TestPoolSharesBackends: its own DateStyle
// and statement_timeout, its own prepared statement, a transaction block
// whose statements see one transaction, and a private query, in rounds.
func poolClient(c *pgx.Conn, i, rounds int, style string) error {
	timeout := fmt.Sprintf("%dms", 20001+i)
	for _, s := range []string{"SET DateStyle = '" + style + "'", "SET statement_timeout = '" + timeout + "'"} {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if _, err := c.Prepare(ctx, "mine", fmt.Sprintf("SELECT $1::int * 1000 + %d, count(*) FROM products", i)); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	var products int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&products); err != nil {
		return err
	}
	for r := range rounds {
		var ds, st, user string
		if err := c.QueryRow(ctx, "SELECT current_setting('DateStyle'), current_setting('statement_timeout'), current_user").Scan(&ds, &st, &user); err != nil {
			return fmt.Errorf("round %d: settings: %w", r, err)
		}
		want := map[string]string{"DateStyle": style, "statement_timeout": fmt.Sprintf("%dms", 20001+i)}
		if ds != want["DateStyle"] || st != want["statement_timeout"] {
			return fmt.Errorf("round %d: DateStyle %q, statement_timeout %q; want %q, %q", r, ds, st, style, want["statement_timeout"])
		}
		if user != c.Config().User {
			return fmt.Errorf("round %d: current_user %q, want %q", r, user, c.Config().User)
		}
		var v, n int64
		if err := c.QueryRow(ctx, "mine", r).Scan(&v, &n); err != nil {
			return fmt.Errorf("round %d: prepared statement: %w", r, err)
		}
		if v != int64(r*1000+i) || n != products {
			return fmt.Errorf("round %d: prepared statement gave %d, %d; want %d, %d", r, v, n, r*1000+i, products)
		}
		// A transaction block stays on one backend: its statements see
		// one transaction start, and its SET LOCAL.
		tx, err := c.Begin(ctx)
		if err != nil {
			return fmt.Errorf("round %d: BEGIN: %w", r, err)
		}
		var t1, t2 string
		var local string
		if err := tx.QueryRow(ctx, "SELECT extract(epoch FROM now())::text").Scan(&t1); err != nil {
			return fmt.Errorf("round %d: in block: %w", r, err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL DateStyle = 'SQL, MDY'"); err != nil {
			return fmt.Errorf("round %d: SET LOCAL: %w", r, err)
		}
		time.Sleep(time.Duration(i%4) * time.Millisecond)
		if err := tx.QueryRow(ctx, "SELECT extract(epoch FROM now())::text, current_setting('DateStyle')").Scan(&t2, &local); err != nil {
			return fmt.Errorf("round %d: in block: %w", r, err)
		}
		if t1 != t2 || local != "SQL, MDY" {
			return fmt.Errorf("round %d: in one block: now() %v then %v, DateStyle %q: not one transaction", r, t1, t2, local)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("round %d: COMMIT: %w", r, err)
		}
		if r%2 == 0 {
			var cnt int64
			if err := c.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&cnt); err != nil {
				return fmt.Errorf("round %d: private query: %w", r, err)
			}
		}
	}
	// RESET gives back the connection's startup value, on whichever
	// backend serves the next statement.
	if _, err := c.Exec(ctx, "RESET DateStyle"); err != nil {
		return err
	}
	for range 3 {
		var ds string
		if err := c.QueryRow(ctx, "SHOW DateStyle").Scan(&ds); err != nil {
			return err
		}
		if ds != "ISO, MDY" {
			return fmt.Errorf("after RESET: DateStyle %q, want ISO, MDY", ds)
		}
	}
	return nil
}

// TestPoolWaitBounded: with every backend in a transaction block, a
// statement of another session waits for one at most
// limits.statement_timeout, or the session's shorter statement_timeout
// (57014), or until its client cancels it (57014 at once); once the
// block ends, it runs.
func TestPoolWaitBounded(t *testing.T) {
	addr := poolProxy(t, "pool_wait", 1, "statement_timeout: 1500ms")
	holder := connectAt(t, addr, "pool_wait_a", "pw", pgx.QueryExecModeSimpleProtocol)
	waiter := connectAt(t, addr, "pool_wait_b", "pw", pgx.QueryExecModeSimpleProtocol)
	quick := connectAt(t, addr, "pool_wait_b", "pw", pgx.QueryExecModeSimpleProtocol)
	if _, err := quick.Exec(ctx, "SET statement_timeout = '300ms'"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := waiter.Exec(ctx, "SELECT 1")
	checkCode(t, "waiting past statement_timeout", err, "57014")
	if d := time.Since(start); d < 1400*time.Millisecond || d > 5*time.Second {
		t.Errorf("the wait ended after %v, want about 1.5s", d)
	}
	// A session's own shorter statement_timeout bounds its wait.
	start = time.Now()
	_, err = quick.Exec(ctx, "SELECT 1")
	checkCode(t, "waiting past the session's statement_timeout", err, "57014")
	if d := time.Since(start); d < 250*time.Millisecond || d > time.Second {
		t.Errorf("the wait under statement_timeout 300ms ended after %v", d)
	}
	// A CancelRequest from the client (pgx would close the connection
	// on a context's end instead).
	timer := time.AfterFunc(200*time.Millisecond, func() { waiter.PgConn().CancelRequest(context.Background()) })
	defer timer.Stop()
	start = time.Now()
	_, err = waiter.Exec(ctx, "SELECT 1")
	checkCode(t, "a cancelled wait", err, "57014")
	if d := time.Since(start); d > time.Second {
		t.Errorf("the cancelled wait ended after %v, want about 200ms", d)
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	var one int
	eventually(t, 5*time.Second, "a statement once the backend is free", func() error {
		return waiter.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
}

// TestPoolDiscardAll: two sessions share a backend and a prepared
// statement's text; one runs DISCARD ALL, which drops every prepared
// statement on that backend; the other's still runs.
func TestPoolDiscardAll(t *testing.T) {
	addr := poolProxy(t, "pool_discard", 1, "")
	a := connectAt(t, addr, "pool_discard_a", "pw", pgx.QueryExecModeCacheStatement)
	b := connectAt(t, addr, "pool_discard_b", "pw", pgx.QueryExecModeCacheStatement)
	const q = "SELECT count(*) FROM products WHERE price > $1"
	for _, c := range []*pgx.Conn{a, b, a} {
		var n int64
		if err := c.QueryRow(ctx, q, 1).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Exec(ctx, "DISCARD ALL", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := a.QueryRow(ctx, q, 1).Scan(&n); err != nil {
		t.Fatalf("a's prepared statement after b's DISCARD ALL: %v", err)
	}
	var ds string
	if err := a.QueryRow(ctx, "SHOW DateStyle").Scan(&ds); err != nil || ds != "ISO, MDY" {
		t.Errorf("a's DateStyle: %q, %v", ds, err)
	}
}

// TestPoolReplicaLost: in transaction mode with replicas, a session
// whose borrowed backend's replica dies inside a transaction block sees
// the block aborted, then goes on, on other backends, with its settings
// and prepared statements.
func TestPoolReplicaLost(t *testing.T) {
	r := startReplicated(t, 2)
	_, addr, _ := startProxyWith(t, r.config(t, r.standbys, "replica_check_interval: 100ms\nlimits: {pool: {mode: transaction, max_backends: 2}}\n"))
	c := dialNamed(t, addr, "pool_lost")
	if _, err := c.Exec(ctx, "SET DateStyle = 'SQL, DMY'"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(ctx, "products_count", "SELECT count(*) FROM products"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := dpCount(c, 1); err != nil {
		t.Fatal(err)
	}
	// The block's backend: the one idle in a transaction for this client.
	var victim *pgtest.Server
	for _, s := range append([]*pgtest.Server{r.primary}, r.standbys...) {
		admin, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pool_lost' AND state = 'idle in transaction'").Scan(&n)
		admin.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			victim = s
		}
	}
	if victim == nil || victim == r.primary {
		t.Fatalf("the block's backend is not on a standby (%v)", victim)
	}
	victim.Kill()
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement on the killed replica succeeded")
	}
	_, err := c.Exec(ctx, "SELECT 1")
	checkCode(t, "in the aborted block", err, "25P02")
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK: %v", err)
	}
	for range 4 { // on whichever backends serve it
		var ds string
		if err := c.QueryRow(ctx, "SHOW DateStyle").Scan(&ds); err != nil || ds != "SQL, DMY" {
			t.Errorf("DateStyle after the failover: %q, %v", ds, err)
		}
		var n int64
		if err := c.QueryRow(ctx, "products_count", pgx.QueryExecModeCacheStatement).Scan(&n); err != nil || n == 0 {
			t.Errorf("prepared statement after the failover: %d, %v", n, err)
		}
		if _, err := dpCount(c, 2); err != nil {
			t.Errorf("private query after the failover: %v", err)
		}
	}
}

// TestPoolPrivateLendsBackend: a private query gives its backend back
// when its answer leaves at the end of its time slot, not when the answer
// is ready (that moment would show its running time to a statement
// waiting for the backend: TestPoolBackendFollowsTheClock); a statement
// after it in the same Query takes a backend again, and another session's
// statement runs once the answer has left.
func TestPoolPrivateLendsBackend(t *testing.T) {
	addr := poolProxyWith(t, "pool_lend", 1, "", "response_quantum: 3s")
	dp := connectAt(t, addr, "pool_lend_a", "pw", pgx.QueryExecModeSimpleProtocol)
	other := connectAt(t, addr, "pool_lend_b", "pw", pgx.QueryExecModeSimpleProtocol)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var n int64
		done <- dp.QueryRow(ctx, "SELECT count(*) FROM orders; SELECT count(*) FROM products").Scan(&n)
	}()
	time.Sleep(500 * time.Millisecond)
	var one int
	if err := other.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2900*time.Millisecond {
		t.Errorf("a pass-through statement ran on the private query's backend after %v, before its answer's 3s slot ended", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("the private query, then a statement after it in the same Query: %v", err)
	}
	if d := time.Since(start); d < 2900*time.Millisecond {
		t.Errorf("the private answer left after %v, before its 3s slot ended", d)
	}
}
