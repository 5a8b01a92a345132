package e2e

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQL-breadth tests run against a proxy of their own, with one analyst
// no other test uses. Every noisy answer is compared with the truth
// computed directly on the database with the same bounds; tolerances are
// the noise's tail at probability 1e-6 per comparison (Laplace:
// scale·ln(1e6) ≈ 13.8·scale), so a false failure is rarer than 1e-5 per run.
var sqlConfig = `
listen: 127.0.0.1:0
upstream: UPSTREAM
auth:
  method: trust
  users:
    - {name: sqlbreadth, budget: {epsilon: 100000, delta: 0.5}}
privacy:
  epsilon: 1.0
  max_epsilon_per_query: 10.0
  delta: 1.0e-7
  mechanism: laplace
` + shopTables

const tail = 13.82 // ln(1e6)

func sqlConn(t *testing.T) *pgx.Conn {
	t.Helper()
	_, addr, _ := startProxyWith(t, configFor(t, sqlConfig, nil))
	conn, err := dialAt(addr, "sqlbreadth", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func setEps(t *testing.T, conn *pgx.Conn, eps string) {
	t.Helper()
	if _, err := conn.Exec(ctx, "SET dp.epsilon = "+eps); err != nil {
		t.Fatal(err)
	}
}

func near(t *testing.T, what string, got, truth, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-truth) > tol {
		t.Errorf("%s = %v, truth %v: off by more than %v", what, got, truth, tol)
	}
}

func TestSQLJoinWithPublicTable(t *testing.T) {
	conn := sqlConn(t)
	setEps(t, conn, "2")
	// No GROUP BY: L0 = 1, Laplace scale R/ε = 4.
	got := queryFloat(t, conn, "SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id WHERE p.category = 'audio'")
	truth := queryFloat(t, direct(t), `SELECT sum(least(n, 8)) FROM (SELECT o.customer_id, count(*) n FROM orders o
		JOIN products p ON p.product_id = o.product_id WHERE p.category = 'audio' GROUP BY o.customer_id) u`)
	near(t, "joined count", got, truth, 4*tail)
	// A sum over the join (left join, private on the preserved side).
	got = queryFloat(t, conn, "SELECT sum(o.amount) FROM orders o LEFT JOIN products p ON p.product_id = o.product_id WHERE p.price > 100")
	truth = queryFloat(t, direct(t), `SELECT sum(s * least(1, 8.0 / n)) FROM (SELECT o.customer_id, count(*) n, sum(least(greatest(o.amount, 0), 500)) s
		FROM orders o LEFT JOIN products p ON p.product_id = o.product_id WHERE p.price > 100 GROUP BY o.customer_id) u`)
	near(t, "joined sum", got, truth, 8*500/2*tail)
	// Grouping by a public column of the joined table releases every
	// value of it (read from products), with no partition selection.
	rows, err := conn.Query(ctx, "SELECT p.category, count(*) FROM orders o JOIN products p USING (product_id) GROUP BY p.category ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	cats, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil {
		t.Fatal(err)
	}
	if len(cats) != 5 {
		t.Errorf("got %d categories, want 5: %v", len(cats), cats)
	}
	// Two private tables: refused, with the reason.
	wantCode(t, conn, "SELECT count(*) FROM orders o JOIN customers c ON c.customer_id = o.customer_id", "0A000", "two private tables")
	// Private table on the nullable side of an outer join: refused.
	wantCode(t, conn, "SELECT count(*) FROM products p LEFT JOIN orders o ON p.product_id = o.product_id", "0A000", "nullable side")
}

func TestSQLCountDistinct(t *testing.T) {
	conn := sqlConn(t)
	setEps(t, conn, "2")
	// Each customer keeps at most R = 8 of its products; L∞ = 8, scale 4.
	got := queryFloat(t, conn, "SELECT count(DISTINCT product_id) FROM orders WHERE amount > 50")
	truth := queryFloat(t, direct(t), "SELECT count(DISTINCT product_id) FROM orders WHERE amount > 50")
	// With 2000 customers every product survives the per-unit cap.
	near(t, "count(DISTINCT product_id)", got, truth, 4*tail)
	// The privacy unit: L∞ = 1.
	got = queryFloat(t, conn, "SELECT count(DISTINCT customer_id) FROM orders WHERE channel = 'web'")
	truth = queryFloat(t, direct(t), "SELECT count(DISTINCT customer_id) FROM orders WHERE channel = 'web'")
	near(t, "count(DISTINCT customer_id)", got, truth, 0.5*tail)
	// Per public region, with FILTER: four groups.
	rows, err := conn.Query(ctx, "SELECT region, count(DISTINCT channel) FILTER (WHERE amount < 300) FROM orders GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var region string
		var c int64
		if err := rows.Scan(&region, &c); err != nil {
			t.Fatal(err)
		}
		n++
		// The true value is 3 (web, app, store) or 4 with the phone order;
		// scale R·L0/ε with L0 = 4 public regions: 16.
		near(t, "count(DISTINCT channel) in "+region, float64(c), 3, 16*tail)
	}
	if rows.Err() != nil || n != 4 {
		t.Errorf("got %d regions (%v), want 4", n, rows.Err())
	}
}

// truthWeighted returns (N, S, Q): the bounded count, sum and sum of
// squares of clamped amounts (expectation of R-row sampling per customer).
func truthWeighted(t *testing.T, where string) (n, s, q float64) {
	t.Helper()
	err := direct(t).QueryRow(ctx, `SELECT sum(c * w)::float8, sum(s * w)::float8, sum(q * w)::float8 FROM (
		SELECT count(*) c, least(1, 8.0 / count(*)) w, sum(least(greatest(amount, 0), 500)) s, sum(least(greatest(amount, 0), 500)^2) q
		FROM orders WHERE `+where+` GROUP BY customer_id) u`).Scan(&n, &s, &q)
	if err != nil {
		t.Fatal(err)
	}
	return n, s, q
}

func TestSQLVarianceAndStddev(t *testing.T) {
	conn := sqlConn(t)
	setEps(t, conn, "6") // two aggregates: ε = 3 each, 1 per part
	var v, sd float64
	if err := conn.QueryRow(ctx, "SELECT var_pop(amount)::float8, stddev(amount)::float8 FROM orders WHERE quantity > 1").Scan(&v, &sd); err != nil {
		t.Fatal(err)
	}
	n, s, q := truthWeighted(t, "quantity > 1")
	truth := q/n - (s/n)*(s/n)
	// Error budget (each part at ε = 1): count scale 8, centred sum scale
	// 8·250, centred squares scale 8·250²/2; mean error ≤ tS/N, E[x²]
	// error ≤ (tQ + w²/2·tC)/N, variance error ≤ that + 2·w·mean error,
	// plus the count's effect on both ratios (small at N ≈ 13000).
	w := 250.0
	tC, tS, tQ := 8*tail, 8*w*tail, 8*w*w/2*tail
	tol := (tQ+w*w/2*tC)/n + 2*w*tS/n + truth*tC/n
	near(t, "var_pop(amount)", v, truth, tol)
	samp := truth * n / (n - 1)
	near(t, "stddev(amount)", sd*sd, samp, tol)
	if v < 0 || v > w*w || sd < 0 {
		t.Errorf("var_pop %v or stddev %v outside the feasible range", v, sd)
	}
	// Result types: var_pop of numeric is numeric, as in PostgreSQL.
	rows, err := conn.Query(ctx, "SELECT variance(quantity), stddev_pop(amount) FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	fds := rows.FieldDescriptions()
	rows.Close()
	if len(fds) != 2 || fds[0].Name != "variance" || fds[0].DataTypeOID != 1700 || fds[1].Name != "stddev_pop" || fds[1].DataTypeOID != 1700 {
		t.Errorf("fields = %+v, want variance numeric, stddev_pop numeric", fds)
	}
}

func TestSQLQuantiles(t *testing.T) {
	conn := sqlConn(t)
	truth := queryFloat(t, direct(t), "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount)::numeric FROM orders")
	// ε = 1, Δu = 0.5·8 = 4: a bucket whose rank distance from the median
	// exceeds 2Δu/ε·(ln 64 + ln 1e6) ≈ 144 rows is chosen with probability
	// < 1e-6. Near the median about 40 rows share one unit of amount, and
	// buckets are 500/4096 ≈ 0.12 wide, so the error stays below 4 + 0.12
	// plus the shift from bounding heavy customers' rows; 20 covers all
	// three.
	var sumErr float64
	const runs = 5
	for i := range runs {
		setEps(t, conn, []string{"1", "1.01", "1.02", "1.03", "1.04"}[i])
		var med float64
		var disc float64
		if err := conn.QueryRow(ctx, "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), percentile_disc(0.9) WITHIN GROUP (ORDER BY amount)::float8 FROM orders").Scan(&med, &disc); err != nil {
			t.Fatal(err)
		}
		near(t, "median", med, truth, 20)
		sumErr += math.Abs(med - truth)
		if disc < med || disc > 500 {
			t.Errorf("percentile_disc(0.9) = %v, median %v: not above it within bounds", disc, med)
		}
	}
	t.Logf("median: truth %v, mean absolute error over %d runs %.2f (bucket width 0.12)", truth, runs, sumErr/runs)
	// NULL arguments are left out, as percentile_cont does: the dense
	// histogram's least(width_bucket(NULL, ...), 64) counted each of them
	// in the top bucket, which pulled this median (of the amounts below
	// 100, about 40% of the rows) to the upper bound.
	const below = "percentile_cont(0.5) WITHIN GROUP (ORDER BY CASE WHEN amount < 100 THEN amount END)"
	truthBelow := queryFloat(t, direct(t), "SELECT "+below+"::numeric FROM orders")
	setEps(t, conn, "1.05")
	var medBelow float64
	if err := conn.QueryRow(ctx, "SELECT "+below+" FROM orders").Scan(&medBelow); err != nil {
		t.Fatal(err)
	}
	near(t, "median of the amounts below 100", medBelow, truthBelow, 20)
	// Grouped: each region's histogram rows go to its group. ε = 8, 2
	// per group (L0 = 4): a bucket more than 2Δu/ε·(ln 4096 + ln 1e6) ≈
	// 88 rows of rank from a region's median is chosen with probability
	// < 1e-6; 25 covers that and the bounding of heavy customers' rows.
	setEps(t, conn, "8")
	byRegion := map[string]float64{}
	rows, err := direct(t).Query(ctx, "SELECT region, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount)::float8 FROM orders GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		var v float64
		if err := rows.Scan(&r, &v); err != nil {
			t.Fatal(err)
		}
		byRegion[r] = v
	}
	rows.Close()
	rows, err = conn.Query(ctx, "SELECT region, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM orders GROUP BY region")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var r string
		var v float64
		if err := rows.Scan(&r, &v); err != nil {
			t.Fatal(err)
		}
		near(t, "median of region "+r, v, byRegion[r], 25)
		t.Logf("median of region %s: %v, truth %v", r, v, byRegion[r])
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil || n != 4 {
		t.Errorf("grouped medians: %d rows, %v; want the 4 public regions", n, err)
	}
	wantCode(t, conn, "SELECT min(amount) FROM orders", "0A000", "percentile_cont")
}

func TestSQLExpressionsAndSubqueries(t *testing.T) {
	conn := sqlConn(t)
	setEps(t, conn, "4") // two aggregates: ε = 2 each
	var c, s float64
	err := conn.QueryRow(ctx, `WITH big AS (SELECT customer_id, amount, channel FROM orders WHERE amount > 100)
		SELECT count(*) FILTER (WHERE channel = 'web'), sum(CASE WHEN channel = 'app' THEN amount ELSE 0 END)::float8 FROM big`).Scan(&c, &s)
	if err != nil {
		t.Fatal(err)
	}
	var tc, ts float64
	err = direct(t).QueryRow(ctx, `SELECT sum(cw * least(1, 8.0 / n))::float8, sum(sa * least(1, 8.0 / n))::float8 FROM (
		SELECT customer_id, count(*) n, count(*) FILTER (WHERE channel = 'web') cw,
		       sum(least(greatest(CASE WHEN channel = 'app' THEN amount ELSE 0 END, 0), 500)) sa
		FROM orders WHERE amount > 100 GROUP BY customer_id) u`).Scan(&tc, &ts)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "count(*) FILTER", c, tc, 8/2.0*tail)
	near(t, "sum(CASE ...)", s, ts, 8*500/2.0*tail)

	// A derived table that renames columns.
	got := queryFloat(t, conn, "SELECT count(x.amt) FROM (SELECT o.amount AS amt FROM orders o WHERE o.quantity >= 2) x")
	truth := queryFloat(t, direct(t), "SELECT sum(least(n, 8)) FROM (SELECT customer_id, count(*) n FROM orders WHERE quantity >= 2 GROUP BY customer_id) u")
	near(t, "count over a derived table", got, truth, 8/4.0*tail)

	// GROUP BY expressions: twelve months, each with thousands of customers.
	rows, err := conn.Query(ctx, "SELECT date_trunc('month', ordered_at) AS m, count(*) FROM orders GROUP BY 1 ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	months, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil {
		t.Fatal(err)
	}
	if len(months) < 12 || len(months) > 13 { // the time zone may split a boundary
		t.Errorf("got %d months, want 12", len(months))
	}
	rows, err = conn.Query(ctx, "SELECT CASE WHEN amount < 100 THEN 'small' ELSE 'large' END AS size, width_bucket(amount, 0, 500, 5) AS b, count(*) FROM orders GROUP BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	buckets, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil {
		t.Fatal(err)
	}
	if len(buckets) < 4 {
		t.Errorf("got %d CASE/width_bucket groups, want at least 4: %v", len(buckets), buckets)
	}

	// Per-unit pre-aggregation in a subquery is refused with the reason.
	wantCode(t, conn, "SELECT avg(n) FROM (SELECT customer_id, count(*) n FROM orders GROUP BY customer_id) t", "0A000", "per person")
	// Expressions that could fail on private values are refused.
	wantCode(t, conn, "SELECT sum(amount / quantity) FROM orders", "42501", "division")
}

func TestSQLPostProcessing(t *testing.T) {
	conn := sqlConn(t)
	setEps(t, conn, "4")
	rows, err := conn.Query(ctx, `SELECT region, round(avg(amount), 1) AS a, count(*) * 2 AS c2 FROM orders
		GROUP BY region HAVING count(*) > 100 ORDER BY count(*) DESC LIMIT 3`)
	if err != nil {
		t.Fatal(err)
	}
	fds := rows.FieldDescriptions()
	wantNames := []string{"region", "a", "c2"}
	wantOIDs := []uint32{25, 1700, 20}
	for i, f := range fds {
		if f.Name != wantNames[i] || f.DataTypeOID != wantOIDs[i] {
			t.Errorf("column %d = %s/%d, want %s/%d", i, f.Name, f.DataTypeOID, wantNames[i], wantOIDs[i])
		}
	}
	type row struct {
		region string
		a      float64
		c2     int64
	}
	var got []row
	for rows.Next() {
		var r row
		var a string
		if err := rows.Scan(&r.region, &a, &r.c2); err != nil {
			t.Fatal(err)
		}
		if i := strings.IndexByte(a, '.'); i >= 0 && len(a)-i-1 > 1 {
			t.Errorf("round(avg, 1) = %s has more than one decimal", a)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d rows, want 3 (LIMIT 3 after HAVING)", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].c2 > got[i-1].c2 {
			t.Errorf("rows not ordered by count desc: %v", got)
		}
	}
	for _, r := range got {
		if r.c2%2 != 0 {
			t.Errorf("count(*) * 2 = %d is odd: the arithmetic was not applied to the rounded count", r.c2)
		}
	}
	// HAVING on a noisy count near the threshold can only drop rows; a
	// HAVING that no group passes returns none.
	rows, err = conn.Query(ctx, "SELECT region FROM orders GROUP BY region HAVING count(*) > 1000000")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || n != 0 {
		t.Errorf("HAVING count(*) > 1e6 returned %d rows (%v)", n, rows.Err())
	}
	// A raw column in HAVING or an output is refused, and so is a function
	// that is not allowed on released values.
	wantCode(t, conn, "SELECT region, count(*) FROM orders GROUP BY region HAVING max(amount) > 10", "0A000", "one person")
	wantCode(t, conn, "SELECT region, count(*) + amount FROM orders GROUP BY region", "42501", "GROUP BY")
	wantCode(t, conn, "SELECT region, pg_sleep(count(*)) FROM orders GROUP BY region", "42501", "pg_sleep")
	// An ill-typed post-processing expression is refused before charging.
	before := showBudget(t, conn).epsSpent
	wantCode(t, conn, "SELECT region, lower(count(*)) FROM orders GROUP BY region", "42883", "")
	if after := showBudget(t, conn).epsSpent; after != before {
		t.Errorf("an ill-typed query was charged: ε spent %v -> %v", before, after)
	}
}

func wantCode(t *testing.T, conn *pgx.Conn, sql, code, contains string) {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, contains) {
		t.Errorf("%s: got %v, want SQLSTATE %s mentioning %q", sql, err, code, contains)
	}
}
