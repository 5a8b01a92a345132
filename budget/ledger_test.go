package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgtest"
)

// upstreamURL is a superuser URL, set once by TestMain before any test runs.
var upstreamURL string

func TestMain(m *testing.M) {
	pgtest.Main(m, func(u string) int {
		upstreamURL = u
		return m.Run()
	})
}

// newDB creates a fresh database for one test and drops it afterwards.
func newDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	name := "budget_test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, upstreamURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u, err := pgtest.WithDatabase(upstreamURL, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newPool(t *testing.T, dbURL string, maxConns int32, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func users(pairs ...any) []conf.User {
	var us []conf.User
	for i := 0; i < len(pairs); i += 3 {
		us = append(us, conf.User{Name: pairs[i].(string), Budget: conf.Budget{Epsilon: pairs[i+1].(float64), Delta: pairs[i+2].(float64)}})
	}
	return us
}

func mustOpen(t *testing.T, pool *pgxpool.Pool, us []conf.User) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), pool, us, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// queryText runs a one-value query and returns the value as text, so that
// numeric columns compare exactly.
func queryText(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	var s *string
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if s == nil {
		return "NULL"
	}
	return *s
}

// numEq reports whether two decimal strings are the same number.
func numEq(t *testing.T, a, b string) bool {
	t.Helper()
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		t.Fatalf("not numbers: %q, %q", a, b)
	}
	return x.Cmp(y) == 0
}

func chargeCount(t *testing.T, pool *pgxpool.Pool, analyst string) string {
	return queryText(t, pool, `SELECT count(*)::text FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'`, analyst)
}

func TestOpenIdempotent(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 4, nil)
	us := users("alice", 1.0, 1e-6, "bob", 2.5, 0.0)
	mustOpen(t, pool, us)
	mustOpen(t, pool, us)
	if got := queryText(t, pool, `SELECT string_agg(analyst || '=' || epsilon_limit || '/' || delta_limit || '/' || epsilon_spent, ',' ORDER BY analyst) FROM dpproxy.budgets`); got != "alice=1/0.000001/0,bob=2.5/0/0" {
		t.Errorf("budgets = %q, want %q", got, "alice=1/0.000001/0,bob=2.5/0/0")
	}
	for _, col := range []string{"budgets.epsilon_spent", "budgets.epsilon_limit", "charges.epsilon", "charges.delta"} {
		table, column, _ := strings.Cut(col, ".")
		got := queryText(t, pool, `SELECT data_type FROM information_schema.columns WHERE table_schema = 'dpproxy' AND table_name = $1 AND column_name = $2`, table, column)
		if got != "numeric" {
			t.Errorf("type of %s = %q, want numeric", col, got)
		}
	}
}

// TestOpenInAnOwnedSchema: a ledger role that owns a schema dpproxy made
// for it, with no CREATE on the database (docs/operations.md), opens the
// ledger: creates the tables, then reopens it, with the proxy's
// search_path=pg_catalog.
func TestOpenInAnOwnedSchema(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	var b [4]byte
	rand.Read(b[:])
	role := "budget_ledger_" + hex.EncodeToString(b[:])
	admin := newPool(t, db, 1, nil)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN; CREATE SCHEMA dpproxy AUTHORIZATION "+role+"; REVOKE ALL ON SCHEMA dpproxy FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP SCHEMA dpproxy CASCADE; DROP ROLE "+role)
	})
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	pool := newPool(t, u.String(), 2, map[string]string{"search_path": "pg_catalog"})
	var create bool
	if err := pool.QueryRow(ctx, "SELECT has_database_privilege(current_database(), 'CREATE')").Scan(&create); err != nil || create {
		t.Fatalf("the ledger role may create schemas (%v): the test proves nothing", err)
	}
	us := users("alice", 1.0, 1e-6)
	mustOpen(t, pool, us)
	l := mustOpen(t, pool, users("alice", 2.0, 1e-6))
	if s, err := l.Spent(ctx, "alice"); err != nil || s.EpsilonLimit != 2 {
		t.Errorf("Spent(alice) = %+v, %v; want limit 2", s, err)
	}
	if got := queryText(t, admin, `SELECT string_agg(DISTINCT tableowner, ',') FROM pg_tables WHERE schemaname = 'dpproxy'`); got != role {
		t.Errorf("ledger tables owned by %s, want %s", got, role)
	}
}

func TestOpenConcurrent(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	const n = 4
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		pools[i] = newPool(t, dbURL, 2, nil)
	}
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = Open(context.Background(), pools[i], users("alice", 1.0, 0.0, fmt.Sprintf("user%d", i), 1.0, 0.0), Options{})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	if got := queryText(t, pools[0], `SELECT count(*)::text FROM dpproxy.budgets`); got != "5" {
		t.Errorf("budgets rows = %s, want 5", got)
	}
}

func TestChargeAccumulatesExactly(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 4, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	ctx := context.Background()
	var s Spend
	for i := range 10 {
		var err error
		s, err = l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.1, Fingerprint: "fp"})
		if err != nil {
			t.Fatalf("charge %d of 0.1: %v", i+1, err)
		}
	}
	if got := queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`); got != "1.0" {
		t.Errorf("epsilon_spent = %s, want 1.0", got)
	}
	if s.EpsilonSpent != 1.0 || s.EpsilonLimit != 1.0 || s.EpsilonRemaining() != 0 {
		t.Errorf("after ten charges of 0.1: Spend = %+v, remaining %v; want spent 1, limit 1, remaining 0", s, s.EpsilonRemaining())
	}
	if got := queryText(t, pool, `SELECT sum(epsilon)::text FROM dpproxy.charges WHERE action = 'charge'`); got != "1.0" {
		t.Errorf("sum of charges = %s, want 1.0", got)
	}
	_, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 1e-9, Fingerprint: "fp"})
	var ex *ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("charge beyond an exactly spent budget: err = %v, want ExhaustedError", err)
	}
	if got := chargeCount(t, pool, "alice"); got != "10" {
		t.Errorf("charges recorded = %s, want 10", got)
	}
}

func TestRemainingIsExact(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 4, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 1e-6))
	s, err := l.Charge(context.Background(), Charge{Analyst: "alice", Epsilon: 0.7, Delta: 1e-7, Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	if s.EpsilonRemaining() != 0.3 || s.DeltaRemaining() != 9e-7 || s.EpsilonSpent != 0.7 || s.DeltaSpent != 1e-7 {
		t.Errorf("Spend = %+v, remaining ε=%v δ=%v; want spent 0.7/1e-07, remaining 0.3/9e-07", s, s.EpsilonRemaining(), s.DeltaRemaining())
	}
	s2, err := l.Spent(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s2 != s {
		t.Errorf("Spent = %+v, want %+v", s2, s)
	}
}

func TestOverspendRefused(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 4, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 1e-6))
	ctx := context.Background()
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.7, Fingerprint: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		c       Charge
		wantMsg string
	}{
		{"epsilon", Charge{Analyst: "alice", Epsilon: 0.5, Fingerprint: "b"},
			"privacy budget exceeded: this query needs ε=0.5, δ=0; remaining ε=0.3, δ=1e-06"},
		{"delta", Charge{Analyst: "alice", Epsilon: 0.1, Delta: 2e-6, Fingerprint: "c"},
			"privacy budget exceeded: this query needs ε=0.1, δ=2e-06; remaining ε=0.3, δ=1e-06"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Charge(ctx, tc.c)
			var ex *ExhaustedError
			if !errors.As(err, &ex) {
				t.Fatalf("Charge(%+v) err = %v, want ExhaustedError", tc.c, err)
			}
			if ex.SQLState() != "53400" {
				t.Errorf("SQLState = %s, want 53400", ex.SQLState())
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message = %q, want %q", err.Error(), tc.wantMsg)
			}
			if ex.Remaining.EpsilonSpent != 0.7 || !reflect.DeepEqual(ex.Requested, tc.c) {
				t.Errorf("ExhaustedError = %+v", ex)
			}
		})
	}
	if got := chargeCount(t, pool, "alice"); got != "1" {
		t.Errorf("charges recorded = %s, want 1", got)
	}
	if got := queryText(t, pool, `SELECT epsilon_spent || '/' || delta_spent FROM dpproxy.budgets WHERE analyst = 'alice'`); got != "0.7/0" {
		t.Errorf("spent = %s, want 0.7/0", got)
	}
	// Exactly the remainder is allowed.
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.3, Delta: 1e-6, Fingerprint: "d"}); err != nil {
		t.Errorf("charging exactly the remainder: %v", err)
	}
}

func TestUnknownAnalyst(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	_, err := l.Charge(context.Background(), Charge{Analyst: "mallory", Epsilon: 0.1, Fingerprint: "x"})
	var ua *UnknownAnalystError
	if !errors.As(err, &ua) || ua.Analyst != "mallory" {
		t.Fatalf("Charge for unknown analyst: err = %v, want UnknownAnalystError", err)
	}
	if _, err := l.Spent(context.Background(), "mallory"); !errors.As(err, &ua) {
		t.Errorf("Spent for unknown analyst: err = %v, want UnknownAnalystError", err)
	}
	if got := chargeCount(t, pool, "mallory"); got != "0" {
		t.Errorf("charges recorded = %s, want 0", got)
	}
}

func TestInvalidCharge(t *testing.T) {
	t.Parallel()
	// A closed pool: validation must come before any ledger access.
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.5))
	pool.Close()
	for _, c := range []Charge{
		{Epsilon: math.NaN()},
		{Epsilon: math.Inf(1)},
		{Epsilon: -0.1},
		{Epsilon: 0.1, Delta: 1},
		{Epsilon: 0.1, Delta: -1e-9},
		{Epsilon: 0.1, Delta: math.NaN()},
		{Epsilon: 0, Delta: 0},
	} {
		c.Analyst = "alice"
		_, err := l.Charge(context.Background(), c)
		var ic *InvalidChargeError
		if !errors.As(err, &ic) || ic.SQLState() != "22023" {
			t.Errorf("Charge(ε=%v, δ=%v) err = %v, want InvalidChargeError (22023)", c.Epsilon, c.Delta, err)
		}
	}
}

// TestConcurrentCharges: 40 goroutines, each with its own pool (as if
// separate proxy processes), race to spend one budget.
func TestConcurrentCharges(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	const (
		workers = 40
		tries   = 6
		limit   = "3.3"
	)
	admin := newPool(t, dbURL, 2, nil)
	mustOpen(t, admin, users("alice", 3.3, 1e-5))
	amounts := []float64{0.1, 0.2, 0.05, 0.3, 0.01, 0.15}
	deltas := []float64{0, 1e-7, 0, 3e-7, 0, 0}

	var mu sync.Mutex // guards okEps, okDelta, failures
	okEps, okDelta := new(big.Rat), new(big.Rat)
	var failures []error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		pool := newPool(t, dbURL, 1, nil)
		l := mustOpen(t, pool, nil)
		wg.Go(func() {
			<-start
			for i := range tries {
				k := (w + i) % len(amounts)
				c := Charge{Analyst: "alice", Epsilon: amounts[k], Delta: deltas[k], Fingerprint: fmt.Sprintf("w%d-%d", w, i)}
				_, err := l.Charge(context.Background(), c)
				var ex *ExhaustedError
				mu.Lock()
				switch {
				case err == nil:
					okEps.Add(okEps, ratOf(c.Epsilon))
					okDelta.Add(okDelta, ratOf(c.Delta))
				case !errors.As(err, &ex):
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failures {
		t.Errorf("charge failed other than by exhaustion: %v", err)
	}
	spent := queryText(t, admin, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`)
	dspent := queryText(t, admin, `SELECT delta_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`)
	recorded := queryText(t, admin, `SELECT coalesce(sum(epsilon), 0)::text FROM dpproxy.charges WHERE analyst = 'alice' AND action = 'charge'`)
	drecorded := queryText(t, admin, `SELECT coalesce(sum(delta), 0)::text FROM dpproxy.charges WHERE analyst = 'alice' AND action = 'charge'`)
	sum := okEps.FloatString(10)
	if !numEq(t, spent, sum) || !numEq(t, recorded, sum) {
		t.Errorf("epsilon: successful charges sum to %s, epsilon_spent = %s, dpproxy.charges sum to %s; want all equal", sum, spent, recorded)
	}
	if !numEq(t, dspent, okDelta.FloatString(12)) || !numEq(t, drecorded, okDelta.FloatString(12)) {
		t.Errorf("delta: successful charges sum to %s, delta_spent = %s, dpproxy.charges sum to %s", okDelta.FloatString(12), dspent, drecorded)
	}
	lim, _ := new(big.Rat).SetString(limit)
	if okEps.Cmp(lim) > 0 {
		t.Errorf("overspent: %s > limit %s", sum, limit)
	}
	// Demand far exceeds the budget, so it should be (nearly) used up:
	// the smallest charge is 0.01.
	if new(big.Rat).Sub(lim, okEps).Cmp(big.NewRat(1, 100)) >= 0 {
		t.Errorf("only %s of %s spent although every worker kept asking", sum, limit)
	}
	t.Logf("spent ε=%s δ=%s of 3.3/1e-5", spent, dspent)
}

func ratOf(f float64) *big.Rat {
	r, ok := new(big.Rat).SetString(decimal(f))
	if !ok {
		panic("bad decimal " + decimal(f))
	}
	return r
}

func TestReopenKeepsSpent(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	ctx := context.Background()
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.4, Fingerprint: "x"}); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, pool, users("alice", 2.0, 1e-6))
	s, err := l.Spent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.EpsilonSpent != 0.4 || s.EpsilonLimit != 2 || s.DeltaLimit != 1e-6 || s.EpsilonRemaining() != 1.6 {
		t.Errorf("after raising the limit: %+v, want spent 0.4, limit 2, delta limit 1e-6", s)
	}
	// Lowering the limit below the spend exhausts the budget.
	l = mustOpen(t, pool, users("alice", 0.3, 0.0))
	s, err = l.Spent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.EpsilonSpent != 0.4 || s.EpsilonLimit != 0.3 || s.EpsilonRemaining() != 0 {
		t.Errorf("after lowering the limit: %+v (remaining %v), want spent 0.4, limit 0.3, remaining 0", s, s.EpsilonRemaining())
	}
	var ex *ExhaustedError
	if _, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.01, Fingerprint: "y"}); !errors.As(err, &ex) {
		t.Errorf("charge after lowering the limit: err = %v, want ExhaustedError", err)
	}
}

func TestReadOnlyPool(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, map[string]string{"default_transaction_read_only": "on", "default_transaction_isolation": "serializable"})
	if got := queryText(t, pool, `SHOW default_transaction_read_only`); got != "on" {
		t.Fatalf("default_transaction_read_only = %s, want on", got)
	}
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	if _, err := l.Charge(context.Background(), Charge{Analyst: "alice", Epsilon: 0.5, Fingerprint: "x"}); err != nil {
		t.Fatalf("Charge on a read-only-by-default pool: %v", err)
	}
}

func assertUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("%s: err = %v, want UnavailableError", what, err)
	}
	if ue.SQLState() != "08006" || err.Error() != "privacy budget ledger unavailable: nothing was run" || ue.Err == nil {
		t.Errorf("%s: SQLState %s, message %q, cause %v", what, ue.SQLState(), err.Error(), ue.Err)
	}
}

func TestUnavailableClosedPool(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	pool.Close()
	_, err := l.Charge(context.Background(), Charge{Analyst: "alice", Epsilon: 0.1, Fingerprint: "x"})
	assertUnavailable(t, "Charge", err)
	_, err = l.Spent(context.Background(), "alice")
	assertUnavailable(t, "Spent", err)
}

func TestUnavailableStoppedServer(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartTB(t, pgtest.Options{})
	pool := newPool(t, srv.URL, 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	if _, err := l.Charge(context.Background(), Charge{Analyst: "alice", Epsilon: 0.1, Fingerprint: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.1, Fingerprint: "y"})
	assertUnavailable(t, "Charge", err)
	_, err = Open(ctx, pool, users("alice", 1.0, 0.0), Options{})
	if err == nil {
		t.Error("Open on a stopped server succeeded")
	}
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l := mustOpen(t, pool, users("alice", 1.0, 0.0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Charge(ctx, Charge{Analyst: "alice", Epsilon: 0.1, Fingerprint: "x"})
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.SQLState() != "57014" || !errors.Is(err, context.Canceled) {
		t.Fatalf("Charge with canceled ctx: err = %v, want UnavailableError with 57014 wrapping context.Canceled", err)
	}
	if got := chargeCount(t, pool, "alice"); got != "0" {
		t.Errorf("charges recorded = %s, want 0", got)
	}
}

func TestOpenRejectsBadUsers(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	for _, us := range [][]conf.User{
		users("", 1.0, 0.0),
		users("alice", math.NaN(), 0.0),
		users("alice", 1.0, 1.0),
	} {
		if _, err := Open(context.Background(), pool, us, Options{}); err == nil {
			t.Errorf("Open(%+v) succeeded", us)
		}
	}
}

func TestSpendRemainingNeverNegative(t *testing.T) {
	s := Spend{EpsilonSpent: 2, EpsilonLimit: 1, DeltaSpent: 1e-5, DeltaLimit: 1e-6}
	if s.EpsilonRemaining() != 0 || s.DeltaRemaining() != 0 {
		t.Errorf("remaining = %v, %v; want 0, 0", s.EpsilonRemaining(), s.DeltaRemaining())
	}
	s = Spend{EpsilonSpent: 0.25, EpsilonLimit: 1, DeltaLimit: 1e-6}
	if s.EpsilonRemaining() != 0.75 || s.DeltaRemaining() != 1e-6 {
		t.Errorf("remaining = %v, %v; want 0.75, 1e-06", s.EpsilonRemaining(), s.DeltaRemaining())
	}
}

func TestDecimal(t *testing.T) {
	for f, want := range map[float64]string{0.1: "0.1", 1: "1", 1e-7: "1e-07", 2.5: "2.5", 1e21: "1e+21"} {
		if got := decimal(f); got != want {
			t.Errorf("decimal(%v) = %q, want %q", f, got, want)
		}
	}
}

// TestUnavailableHidesTheDatabaseError: a ledger failure must map to 08006
// at the proxy, which passes on any *pgconn.PgError it finds with
// errors.As; so the cause is not reachable that way.
func TestUnavailableHidesTheDatabaseError(t *testing.T) {
	err := unavailable(fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key value violates unique constraint"}))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		t.Errorf("errors.As found the ledger's database error %v through UnavailableError", pgErr)
	}
	if !errors.Is(unavailable(fmt.Errorf("x: %w", context.Canceled)), context.Canceled) {
		t.Error("errors.Is does not see a canceled cause")
	}
}
