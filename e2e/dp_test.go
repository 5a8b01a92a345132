package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

var ctx = context.Background()

type budgetRow struct{ epsSpent, epsLeft, deltaSpent, deltaLeft float64 }

func showBudget(t *testing.T, conn *pgx.Conn) budgetRow {
	t.Helper()
	rows, err := conn.Query(ctx, "SHOW dp.budget")
	if err != nil {
		t.Fatalf("SHOW dp.budget: %v", err)
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	want := []string{"epsilon_spent", "epsilon_remaining", "delta_spent", "delta_remaining"}
	if len(fds) != 4 {
		t.Fatalf("SHOW dp.budget has %d columns, want 4", len(fds))
	}
	for i, f := range fds {
		if f.Name != want[i] || f.DataTypeOID != 1700 {
			t.Fatalf("SHOW dp.budget column %d = %s (oid %d), want %s numeric", i, f.Name, f.DataTypeOID, want[i])
		}
	}
	if !rows.Next() {
		t.Fatalf("SHOW dp.budget returned no row: %v", rows.Err())
	}
	vals, err := rows.Values()
	if err != nil {
		t.Fatal(err)
	}
	var out [4]float64
	for i, v := range vals {
		f, err := toFloat(v)
		if err != nil {
			t.Fatalf("SHOW dp.budget value %d: %v", i, err)
		}
		out[i] = f
	}
	rows.Close()
	return budgetRow{out[0], out[1], out[2], out[3]}
}

func toFloat(v any) (float64, error) {
	n, ok := v.(pgtype.Numeric)
	if !ok {
		return 0, fmt.Errorf("%T is not numeric", v)
	}
	f, err := n.Float64Value()
	return f.Float64, err
}

// queryFloat runs a one-row, one-column query and returns its value.
func queryFloat(t *testing.T, conn *pgx.Conn, sql string) float64 {
	t.Helper()
	var v pgtype.Numeric
	if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	f, err := v.Float64Value()
	if err != nil || !f.Valid {
		t.Fatalf("%s: %v is not a number", sql, v)
	}
	return f.Float64
}

// boundedCount is the exact count after contribution bounding with R rows
// per unit, computed directly on the database (the truth the noise is
// added to).
func boundedCount(t *testing.T, where string, r int) float64 {
	return queryFloat(t, direct(t), "SELECT coalesce(sum(least(n, "+strconv.Itoa(r)+")), 0) FROM (SELECT customer_id, count(*) n FROM orders WHERE "+where+" GROUP BY customer_id) p")
}

func TestCountIsNoisyButNearTheTruth(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	// ε = 1, no GROUP BY: Laplace scale R/ε = 8. P(|noise| > 8 ln 1e6 ≈ 111) = 1e-6.
	const tol = 8 * 13.82
	equal := 0
	for i := range 5 {
		where := "amount < " + strconv.Itoa(10000+i)
		truth := boundedCount(t, where, 8)
		got := queryFloat(t, conn, "SELECT count(*) FROM orders WHERE "+where)
		if math.Abs(got-truth) > tol {
			t.Errorf("count(*) WHERE %s = %v, true bounded count %v: off by more than %v", where, got, truth, tol)
		}
		if got == truth {
			equal++
		}
	}
	// P(rounded Laplace(8) noise = 0) ≈ 1/16 per draw; all five: < 1e-5.
	if equal == 5 {
		t.Errorf("five DP counts all equal the true count: no noise is being added")
	}
}

func TestResultShapeAndPublicKeys(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	rows, err := conn.Query(ctx, "SELECT region, count(*), sum(amount), avg(amount) FROM orders GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	// The types PostgreSQL gives the original query: text, bigint, numeric, numeric.
	wantNames := []string{"region", "count", "sum", "avg"}
	wantOIDs := []uint32{25, 20, 1700, 1700}
	if len(fds) != 4 {
		t.Fatalf("got %d columns, want 4", len(fds))
	}
	for i, f := range fds {
		if f.Name != wantNames[i] || f.DataTypeOID != wantOIDs[i] {
			t.Errorf("column %d = %s/%d, want %s/%d", i, f.Name, f.DataTypeOID, wantNames[i], wantOIDs[i])
		}
	}
	regions := map[string]bool{}
	for rows.Next() {
		var region string
		var count int64
		var sum, avg pgtype.Numeric
		if err := rows.Scan(&region, &count, &sum, &avg); err != nil {
			t.Fatal(err)
		}
		regions[region] = true
		if count < 0 {
			t.Errorf("region %s: negative count %d", region, count)
		}
		a, _ := avg.Float64Value()
		if a.Float64 < 0 || a.Float64 > 500 {
			t.Errorf("region %s: avg %v outside the clamping bounds [0, 500]", region, a.Float64)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"north", "south", "east", "west"} {
		if !regions[r] {
			t.Errorf("public region %q missing from the answer", r)
		}
	}
	if len(regions) != 4 {
		t.Errorf("got regions %v, want exactly the four public ones", regions)
	}
}

func TestGroupKeyOfOnePersonIsSuppressed(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	// Several runs with fresh noise (different ε, so no cache): 'phone'
	// (one customer) must never appear; 'web' (thousands) always.
	for _, eps := range []string{"1", "1.5", "2"} {
		if _, err := conn.Exec(ctx, "SET dp.epsilon = "+eps); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "SELECT channel, count(*) FROM orders GROUP BY channel")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for rows.Next() {
			var ch string
			var n int64
			if err := rows.Scan(&ch, &n); err != nil {
				t.Fatal(err)
			}
			seen[ch] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if seen["phone"] {
			t.Errorf("ε=%s: the channel used by a single customer was released", eps)
		}
		if !seen["web"] || !seen["app"] {
			t.Errorf("ε=%s: common channels missing: %v", eps, seen)
		}
	}
}

func TestEmptySelectionStillReturnsOneNoisyRow(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	rows, err := conn.Query(ctx, "SELECT count(*), sum(amount) FROM orders WHERE amount < 0")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("scalar aggregate over an empty selection returned %d rows, want 1", n)
	}
}

func TestBudgetChargedThenExhausted(t *testing.T) {
	conn := connect(t, "bob", pwBob) // budget ε = 3
	before := showBudget(t, conn)
	if before.epsSpent != 0 || before.epsLeft != 3 {
		t.Fatalf("bob's budget at start = %+v, want 0 spent, 3 left", before)
	}
	for i := range 3 {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE quantity >= "+strconv.Itoa(i)); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	after := showBudget(t, conn)
	if after.epsSpent != 3 || after.epsLeft != 0 {
		t.Fatalf("after three ε=1 queries: %+v, want 3 spent, 0 left", after)
	}
	_, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE quantity >= 9")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53400" {
		t.Fatalf("query beyond the budget: err = %v, want SQLSTATE 53400", err)
	}
	if !strings.Contains(pgErr.Message, "remaining") {
		t.Errorf("budget error %q does not say what remains", pgErr.Message)
	}
	if got := showBudget(t, conn); got != after {
		t.Errorf("a refused query changed the budget: %+v -> %+v", after, got)
	}
}

func TestRepeatedQueryIsCachedAndChargedOnce(t *testing.T) {
	conn := connect(t, "carol", pwCarol)
	before := showBudget(t, conn)
	const q = "SELECT sum(amount) FROM orders WHERE quantity = 2"
	a := queryFloat(t, conn, q)
	b := queryFloat(t, conn, q)
	if a != b {
		t.Errorf("repeated query returned fresh noise: %v then %v", a, b)
	}
	after := showBudget(t, conn)
	if d := after.epsSpent - before.epsSpent; d != 1 {
		t.Errorf("two identical queries charged ε=%v, want 1", d)
	}
}

func TestExplainDPChargesNothing(t *testing.T) {
	conn := connect(t, "carol", pwCarol)
	before := showBudget(t, conn)
	rows, err := conn.Query(ctx, "EXPLAIN DP SELECT region, sum(amount) FROM orders GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		text = append(text, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"GROUP BY customer_id, (region)", "L∞=4000", "Charge: ε=1"} {
		if !strings.Contains(all, want) {
			t.Errorf("EXPLAIN DP output lacks %q:\n%s", want, all)
		}
	}
	if after := showBudget(t, conn); after != before {
		t.Errorf("EXPLAIN DP charged: %+v -> %+v", before, after)
	}
}

func TestWrongPasswordIs28P01(t *testing.T) {
	for _, user := range []string{"alice", "mallory"} {
		_, err := dial(user, "wrong")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
			t.Errorf("%s with a wrong password: err = %v, want SQLSTATE 28P01", user, err)
		}
	}
}

func TestPassThroughOfPublicAndCatalog(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil || !strings.Contains(v, "PostgreSQL") {
		t.Errorf("SELECT version() = %q, %v", v, err)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n); err != nil || n != 50 {
		t.Errorf("count of the public products table = %d, %v; want the exact 50", n, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'public'").Scan(&n); err != nil || n != 1 {
		t.Errorf("catalog query = %d, %v", n, err)
	}
}

func TestSessionSettings(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	for _, c := range []struct{ sql, code string }{
		{"SET dp.epsilon = 0.5", ""},
		{"SET dp.epsilon = 'NaN'", "22023"},
		{"SET dp.epsilon = 'Infinity'", "22023"},
		{"SET dp.epsilon = -1", "22023"},
		{"SET dp.epsilon = 0", "22023"},
		{"SET dp.epsilon = 6", "22023"}, // above max_epsilon_per_query
		{"SET dp.delta = 1", "22023"},
		{"SET dp.delta = 1e-9", ""},
		{"SET dp.mechanism = gaussian", ""},
		{"SET dp.mechanism = uniform", "22023"},
		{"RESET dp.epsilon", ""},
	} {
		_, err := conn.Exec(ctx, c.sql)
		checkCode(t, c.sql, err, c.code)
	}
	var eps string
	if err := conn.QueryRow(ctx, "SHOW dp.epsilon").Scan(&eps); err != nil || eps != "1" {
		t.Errorf("SHOW dp.epsilon after RESET = %q, %v; want 1", eps, err)
	}
	// Gaussian answers work too.
	if _, err := conn.Exec(ctx, "SELECT count(*), avg(amount) FROM orders"); err != nil {
		t.Errorf("gaussian query: %v", err)
	}
}

func checkCode(t *testing.T, sql string, err error, code string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("%s: unexpected error %v", sql, err)
		}
		return
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Errorf("%s: err = %v, want SQLSTATE %s", sql, err, code)
		return
	}
	if !strings.Contains(code, pgErr.Code) {
		t.Errorf("%s: SQLSTATE %s (%s), want %s", sql, pgErr.Code, pgErr.Message, code)
	}
	if pgErr.Message == "" {
		t.Errorf("%s: empty error message", sql)
	}
}
