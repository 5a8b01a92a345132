package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/proxy"
)

// replicated is a primary with the demo dataset and the proxy's two
// roles, and its hot standbys (real streaming replication, pgtest).
type replicated struct {
	primary  *pgtest.Server
	db       string // the test database on the primary, as superuser
	roles    *demo.Roles
	standbys []*pgtest.Server
}

// startReplicated builds a primary and n standbys of it for one test.
func startReplicated(t *testing.T, n int) *replicated {
	t.Helper()
	primary := pgtest.StartTB(t, pgtest.Options{})
	db, err := freshDatabase(ctx, primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &replicated{primary: primary, db: db}
	if r.roles, err = testRoles(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := demo.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	for range n {
		r.standbys = append(r.standbys, pgtest.StandbyTB(t, primary, pgtest.Options{}))
	}
	return r
}

// onPort returns u with its port replaced.
func onPort(t *testing.T, u string, port int) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.Host = "127.0.0.1:" + strconv.Itoa(port)
	return p.String()
}

// config is the shared e2e configuration on this primary, with the given
// standbys as replicas and extra top-level keys.
func (r *replicated) config(t *testing.T, standbys []*pgtest.Server, extra string) *conf.Config {
	t.Helper()
	var reps []string
	for _, s := range standbys {
		reps = append(reps, strconv.Quote(onPort(t, r.roles.QueryURL, s.Port)))
	}
	y := strings.Replace(testconf.YAML(testconf.E2E), "upstream: UPSTREAM",
		"upstream: "+r.roles.QueryURL+"\nledger_upstream: "+r.roles.LedgerURL+clientDatabases+
			"\nreplicas: ["+strings.Join(reps, ", ")+"]\n"+extra, 1)
	pw := map[string]string{"E2E_PW_ALICE": pwAlice, "E2E_PW_BOB": pwBob, "E2E_PW_CAROL": pwCarol}
	cfg, err := conf.Parse(t.Name()+".yaml", []byte(y), func(k string) string { return pw[k] })
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	return cfg
}

// dialNamed connects as alice with an application_name, which the
// proxy passes on to the session's backend, where pg_stat_activity
// shows it.
func dialNamed(t *testing.T, addr, app string) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://alice:%s@%s/shop?sslmode=disable&application_name=%s", pwAlice, addr, app))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// backendsNamed counts the backends of server s (superuser URL) whose
// application_name is app.
func backendsNamed(t *testing.T, s *pgtest.Server, app string) int {
	t.Helper()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// where names the one server among servers holding app's backend.
func where(t *testing.T, app string, servers map[string]*pgtest.Server) string {
	t.Helper()
	found := ""
	for name, s := range servers {
		if n := backendsNamed(t, s, app); n == 1 {
			if found != "" {
				t.Fatalf("%s has backends on %s and %s", app, found, name)
			}
			found = name
		} else if n > 1 {
			t.Fatalf("%s has %d backends on %s", app, n, name)
		}
	}
	return found
}

// dpCount runs a private COUNT and returns its noisy answer.
func dpCount(c *pgx.Conn, k int) (int64, error) {
	var v int64
	err := c.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM orders WHERE amount > %d", k)).Scan(&v)
	return v, err
}

// TestReplicasAnswer: sessions are spread over the replicas, fewest
// sessions first, and their private and pass-through queries run there;
// the ledger charges on the primary.
func TestReplicasAnswer(t *testing.T) {
	r := startReplicated(t, 2)
	cfg := r.config(t, r.standbys, "")
	report, err := proxy.CheckSchema(ctx, cfg)
	if err != nil || !strings.Contains(strings.Join(report, "\n"), "replicas[1]: hot standby") {
		t.Errorf("check-config with two standbys: %v\n%s", err, strings.Join(report, "\n"))
	}
	_, addr, _ := startProxyWith(t, cfg)
	servers := map[string]*pgtest.Server{"primary": r.primary, "standby0": r.standbys[0], "standby1": r.standbys[1]}
	placed := map[string]int{}
	for i := range 4 {
		app := fmt.Sprintf("replica_probe_%d", i)
		c := dialNamed(t, addr, app)
		if _, err := dpCount(c, i); err != nil {
			t.Fatalf("private query: %v", err)
		}
		var n int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n); err != nil || n == 0 {
			t.Fatalf("pass-through query: %d, %v", n, err)
		}
		// PostgreSQL reports in_hot_standby; the proxy passes it on.
		if hs := c.PgConn().ParameterStatus("in_hot_standby"); hs != "on" {
			t.Errorf("session %d: in_hot_standby = %q, want on (a standby)", i, hs)
		}
		placed[where(t, app, servers)]++
	}
	if placed["standby0"] != 2 || placed["standby1"] != 2 {
		t.Errorf("sessions per server: %v, want 2 on each standby", placed)
	}
	var charges int
	admin, err := pgx.Connect(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM dpproxy.charges WHERE analyst = 'alice' AND action = 'charge'").Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 4 {
		t.Errorf("charges on the primary's ledger: %d, want 4", charges)
	}

	// check-config: the primary listed as a replica (another spelling of
	// its URL) is no standby.
	bad := r.config(t, r.standbys[:1], "")
	sep := "?"
	if strings.Contains(r.roles.QueryURL, "?") {
		sep = "&"
	}
	bad.Replicas[0] = conf.Secret(r.roles.QueryURL + sep + "application_name=not_a_standby")
	if _, err := proxy.CheckSchema(ctx, bad); err == nil || !strings.Contains(err.Error(), "replicas[0]: not in recovery") {
		t.Errorf("check-config with the primary as a replica: %v", err)
	}
}

// TestReplicaKilledUnderLoad kills one of two replicas (SIGKILL) while
// clients run private queries, and checks that every charge in the
// ledger paid for exactly one answer a client received or one opaque
// "charge is kept" error (no lost, no double charge), that every other
// error charged nothing, and that every session goes on answering on the
// surviving replica without reconnecting.
func TestReplicaKilledUnderLoad(t *testing.T) {
	r := startReplicated(t, 2)
	_, addr, _ := startProxyWith(t, r.config(t, r.standbys, "replica_check_interval: 100ms\n"))
	const clients = 4
	conns := make([]*pgx.Conn, clients)
	for i := range conns {
		conns[i] = dialNamed(t, addr, fmt.Sprintf("replica_load_%d", i))
	}
	var (
		mu                                sync.Mutex // guards the counts below
		answers, chargedErrors, uncharged int
		afterKill                         = make([]int, clients)
		otherErrs                         []string
		killed                            = make(chan struct{})
		wg                                sync.WaitGroup
	)
	for i, c := range conns {
		wg.Go(func() {
			isKilled := false
			for n := 0; ; n++ {
				select {
				case <-killed:
					isKilled = true
				default:
				}
				if isKilled && afterKill[i] >= 10 {
					return
				}
				if n > 2000 {
					return // the replica was never killed: the test fails below
				}
				_, err := dpCount(c, 1000+i*10000+n) // never the same question: no cached answers
				mu.Lock()
				var pe *pgconn.PgError
				switch {
				case err == nil:
					answers++
					if isKilled {
						afterKill[i]++
					}
				case errors.As(err, &pe) && strings.Contains(pe.Message, "charge is kept"):
					chargedErrors++
				case errors.As(err, &pe) && pe.Severity != "FATAL":
					uncharged++
					otherErrs = append(otherErrs, pe.Code+" "+pe.Message)
				default:
					otherErrs = append(otherErrs, err.Error())
					mu.Unlock()
					t.Errorf("client %d lost its session: %v", i, err)
					return
				}
				mu.Unlock()
			}
		})
	}
	// Kill once every client has had answers (all sessions busy).
	eventually(t, 30*time.Second, "answers before the kill", func() error {
		mu.Lock()
		defer mu.Unlock()
		if answers < 3*clients {
			return fmt.Errorf("%d answers", answers)
		}
		return nil
	})
	r.standbys[0].Kill()
	close(killed)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, n := range afterKill {
		if n < 10 {
			t.Errorf("client %d: %d answers after the kill, want 10", i, n)
		}
	}
	admin, err := pgx.Connect(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var charges int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM dpproxy.charges WHERE analyst = 'alice' AND action = 'charge'").Scan(&charges); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answers, %d charged errors, %d uncharged errors %v, %d charges", answers, chargedErrors, uncharged, otherErrs, charges)
	if charges != answers+chargedErrors {
		t.Errorf("ledger holds %d charges for %d answers and %d charged errors", charges, answers, chargedErrors)
	}
	if chargedErrors+uncharged == 0 {
		t.Errorf("no query failed: the kill hit no session (sessions on the killed replica: the test proves nothing)")
	}
	if uncharged > clients {
		t.Errorf("%d uncharged errors, want at most one per session: %v", uncharged, otherErrs)
	}
}

// TestReplicaLagAvoided pauses replay on the only replica while the
// primary writes: once the checker sees the lag beyond replica_max_lag,
// new sessions go to the primary; once replay resumes, to the replica
// again. A session already on it stays there.
func TestReplicaLagAvoided(t *testing.T) {
	r := startReplicated(t, 1)
	standby := r.standbys[0]
	_, addr, _ := startProxyWith(t, r.config(t, r.standbys, "replica_max_lag: 300ms\nreplica_check_interval: 50ms\n"))
	servers := map[string]*pgtest.Server{"primary": r.primary, "standby": standby}
	dialNamed(t, addr, "lag_before")
	if got := where(t, "lag_before", servers); got != "standby" {
		t.Fatalf("first session on %q, want the standby", got)
	}
	sb, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	if _, err := sb.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE TABLE lag_probe(x int); INSERT INTO lag_probe VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	n := 0
	eventually(t, 10*time.Second, "a new session avoids the lagging replica", func() error {
		n++
		app := fmt.Sprintf("lag_during_%d", n)
		dialNamed(t, addr, app)
		if got := where(t, app, servers); got != "primary" {
			return fmt.Errorf("session on %s", got)
		}
		return nil
	})
	if got := where(t, "lag_before", servers); got != "standby" {
		t.Errorf("the session from before the lag moved to %q", got)
	}
	if _, err := sb.Exec(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new session on the caught-up replica", func() error {
		n++
		app := fmt.Sprintf("lag_after_%d", n)
		dialNamed(t, addr, app)
		if got := where(t, app, servers); got != "standby" {
			return fmt.Errorf("session on %s", got)
		}
		return nil
	})
}

// TestReplicaLostSessionContinues kills the replica a session is on
// while the session is inside a transaction block: the next statement
// fails, the block is aborted as PostgreSQL aborts one (25P02 until
// ROLLBACK), and then the session goes on, on the other replica, with
// its settings and prepared statements.
func TestReplicaLostSessionContinues(t *testing.T) {
	r := startReplicated(t, 2)
	_, addr, _ := startProxyWith(t, r.config(t, r.standbys, "replica_check_interval: 100ms\n"))
	servers := map[string]*pgtest.Server{"primary": r.primary, "standby0": r.standbys[0], "standby1": r.standbys[1]}
	c := dialNamed(t, addr, "lost_session")
	on := where(t, "lost_session", servers)
	victim, other := r.standbys[0], "standby1"
	if on == "standby1" {
		victim, other = r.standbys[1], "standby0"
	} else if on != "standby0" {
		t.Fatalf("session on %q, want a standby", on)
	}
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
	victim.Kill()
	for name, s := range servers {
		if s == victim {
			delete(servers, name)
		}
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement on the killed replica succeeded")
	}
	var pe *pgconn.PgError
	if _, err := c.Exec(ctx, "SELECT 1"); !errors.As(err, &pe) || pe.Code != "25P02" {
		t.Fatalf("in the aborted block: %v, want 25P02", err)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK: %v", err)
	}
	if got := where(t, "lost_session", servers); got != other {
		t.Errorf("session now on %q, want %s", got, other)
	}
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
