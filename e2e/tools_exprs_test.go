package e2e

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Issue 14, items 2–4 (the rewriter's part): the expressions analysts'
// tools write in private queries, through the proxy, with the answers
// compared with the truth computed directly on the database. The SQL is
// each tool's own, as its query builder writes it:
//
//   - Metabase: time breakouts and binning (src/metabase/driver/postgres.clj,
//     date and ->honeysql [:postgres :field] with binning; the week with a
//     Sunday start is "date_trunc('week', d + 1 day) - 1 day"), its
//     case-insensitive "contains" filter (lower(col) LIKE '%x%').
//   - Grafana: $__timeGroup(col, 1d) expands to floor(extract(epoch from
//     col)/86400)*86400 (pkg/tsdb/grafana-postgresql-datasource/macros.go).
//   - Superset: the time range filter TO_DATE(...) / TO_TIMESTAMP(...) and
//     the weekly grain DATE_TRUNC('week', col)
//     (superset/db_engine_specs/postgres.py, _time_grain_expressions and
//     convert_dttm).
//   - psqlODBC (Excel, Power BI): three-part names database.schema.table.
//   - knex and other query builders: LIKE patterns bound as parameters.
//
// customers (one row per person: max_rows_per_unit 1, one group each) has
// the demo's DATE column, signup_date, and a bounded age; counts over it
// have Laplace scale 1/ε per released number, so the answers can be
// checked closely.

// toolRows runs sql through conn and returns its rows as key -> count,
// the key being the text of every column but the last.
func toolRows(t *testing.T, conn *pgx.Conn, sql string, args ...any) (map[string]float64, error) {
	t.Helper()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		var key []string
		for _, v := range vals[:len(vals)-1] {
			key = append(key, toolText(v))
		}
		f, err := toolFloat(vals[len(vals)-1])
		if err != nil {
			return nil, err
		}
		out[strings.Join(key, "|")] = f
	}
	return out, rows.Err()
}

// toolText is the text of a key value, comparable between the proxy and
// the database (numbers as numbers, times as their instants).
func toolText(v any) string {
	if f, err := toolFloat(v); err == nil {
		return fmt.Sprint(f)
	}
	return fmt.Sprint(v)
}

// toolFloat is a number of any of the types the answers come in.
func toolFloat(v any) (float64, error) {
	switch x := v.(type) {
	case int64:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	}
	return toFloat(v)
}

// checkAgainstTruth runs sql through the proxy and directly, and checks
// that every released group exists and its count is within tol of the
// truth, and that the released groups cover most of the truth's large
// ones (partition selection drops only small groups).
func checkAgainstTruth(t *testing.T, conn, up *pgx.Conn, sql string, tol float64) {
	t.Helper()
	got, err := toolRows(t, conn, sql)
	if err != nil {
		t.Errorf("%s: refused through the proxy: %v", sql, err)
		return
	}
	truth, err := toolRows(t, up, sql)
	if err != nil {
		t.Fatalf("%s directly: %v", sql, err)
	}
	if len(got) == 0 {
		t.Errorf("%s: no group released (truth has %d)", sql, len(truth))
	}
	for k, v := range got {
		tv, ok := truth[k]
		if !ok {
			t.Errorf("%s: released group %q does not exist", sql, k)
			continue
		}
		if math.Abs(v-tv) > tol {
			t.Errorf("%s: group %q = %v, truth %v: off by more than %v", sql, k, v, tv, tol)
		}
	}
	for k, tv := range truth {
		if _, ok := got[k]; !ok && tv > 40 {
			t.Errorf("%s: group %q (truth %v) was not released", sql, k, tv)
		}
	}
}

func TestToolsTimeAndNumberBuckets(t *testing.T) {
	conn := sqlConn(t)
	up := direct(t)
	setEps(t, conn, "4")
	// ε 4, split between the count and partition selection: Laplace
	// scale 1/2 per count of customers.
	const tol = 0.5 * tail
	for _, sql := range []string{
		// Metabase, DATE column: month, week (Sunday start), month of year.
		`SELECT CAST(date_trunc('month', "public"."customers"."signup_date") AS date) AS "signup_date", count(*) AS "count" FROM "public"."customers" GROUP BY CAST(date_trunc('month', "public"."customers"."signup_date") AS date) ORDER BY CAST(date_trunc('month', "public"."customers"."signup_date") AS date) ASC`,
		`SELECT CAST((date_trunc('week', CAST(("public"."customers"."signup_date" + INTERVAL '1 day') AS date)) + INTERVAL '-1 day') AS date) AS "signup_date", count(*) AS "count" FROM "public"."customers" GROUP BY CAST((date_trunc('week', CAST(("public"."customers"."signup_date" + INTERVAL '1 day') AS date)) + INTERVAL '-1 day') AS date) ORDER BY CAST((date_trunc('week', CAST(("public"."customers"."signup_date" + INTERVAL '1 day') AS date)) + INTERVAL '-1 day') AS date) ASC`,
		`SELECT CAST(extract(month from "public"."customers"."signup_date") AS integer) AS "signup_date", count(*) AS "count" FROM "public"."customers" GROUP BY CAST(extract(month from "public"."customers"."signup_date") AS integer) ORDER BY CAST(extract(month from "public"."customers"."signup_date") AS integer) ASC`,
		`SELECT CAST(extract(year from "public"."customers"."signup_date") AS integer) AS "signup_date", count(*) AS "count" FROM "public"."customers" GROUP BY 1 ORDER BY 1 ASC`,
		// psql: day of week, by position.
		`SELECT extract(dow FROM signup_date) AS dow, count(*) FROM customers GROUP BY 1 ORDER BY 1`,
		// Superset's weekly grain on a date column.
		`SELECT DATE_TRUNC('week', signup_date) AS __timestamp, COUNT(*) AS count FROM public.customers GROUP BY DATE_TRUNC('week', signup_date) LIMIT 50000`,
		// Grafana's $__timeGroup(signup_date, 30d) with the time alias.
		`SELECT floor(extract(epoch from signup_date)/2592000)*2592000 AS "time", count(*) AS "count" FROM customers GROUP BY 1 ORDER BY 1`,
		// Metabase's numeric auto-binning of a bounded integer column.
		`SELECT (FLOOR((("public"."customers"."age" - 18.0) / 10.0)) * 10.0) + 18.0 AS "age", count(*) AS "count" FROM "public"."customers" GROUP BY (FLOOR((("public"."customers"."age" - 18.0) / 10.0)) * 10.0) + 18.0 ORDER BY (FLOOR((("public"."customers"."age" - 18.0) / 10.0)) * 10.0) + 18.0 ASC`,
		// Integer division, as PostgreSQL computes it (div() in the rewrite).
		`SELECT floor((age - 18) / 10) * 10 AS b, count(*) FROM customers GROUP BY 1`,
		// GROUP BY an output alias.
		`SELECT date_trunc('month', signup_date) AS m, count(*) FROM customers GROUP BY m ORDER BY m`,
	} {
		checkAgainstTruth(t, conn, up, sql, tol)
	}
	// Grafana's time series over orders (timestamptz), answered with its
	// exact macro expansion.
	got, err := toolRows(t, conn, `SELECT floor(extract(epoch from ordered_at)/2592000)*2592000 AS "time", count(*) AS "count" FROM orders GROUP BY 1 ORDER BY 1`)
	if err != nil || len(got) == 0 {
		t.Errorf("Grafana $__timeGroup over orders: %v, %d groups", err, len(got))
	}
	for k := range got {
		if f, err := toFloatText(k); err != nil || math.Mod(f, 2592000) != 0 {
			t.Errorf("Grafana $__timeGroup key %q is not a multiple of 2592000", k)
		}
	}
	// The limits: refused with a message naming the cause, not floor.
	wantCode(t, conn, "SELECT floor(extract(epoch from ordered_at)/amount)*60 AS b, count(*) FROM orders GROUP BY 1", "42501", "non-zero constant")
	wantCode(t, conn, "SELECT CAST(extract(epoch FROM signup_date) AS integer) AS e, count(*) FROM customers GROUP BY 1", "42501", "to int4")
	wantCode(t, conn, "SELECT channel AS c, region AS c, count(*) FROM orders GROUP BY c", "42702", "ambiguous")
}

func toFloatText(s string) (float64, error) {
	var f float64
	_, err := fmt.Sscan(s, &f)
	return f, err
}

func TestToolsFilters(t *testing.T) {
	conn := sqlConn(t)
	up := direct(t)
	setEps(t, conn, "4")
	// One count of customers without GROUP BY: Laplace scale 1/4.
	tolC := 0.25 * tail
	for _, where := range []string{
		"signup_date >= TO_DATE('2023-01-01', 'YYYY-MM-DD') AND signup_date < TO_DATE('2024-01-01', 'YYYY-MM-DD')",
		"signup_date > current_date - 30",
		"signup_date <= current_date",
		"signup_date + interval '30 days' >= TO_DATE('2024-01-01', 'YYYY-MM-DD')",
		"lower(region) LIKE '%nor%'",
		"upper(region) LIKE 'SOU%'",
		"region ILIKE 'EA%'",
		"age::numeric * 2 > 100",
	} {
		sql := "SELECT count(*) AS \"count\" FROM \"public\".\"customers\" WHERE " + where
		got := queryFloat(t, conn, sql)
		truth := queryFloat(t, up, strings.Replace(sql, "count(*)", "count(*)::numeric", 1))
		near(t, sql, got, truth, tolC)
	}
	// orders: R = 8 rows per customer, Laplace scale 8/4.
	tolO := 2 * tail
	for _, where := range []string{
		"ordered_at >= TO_TIMESTAMP('2024-03-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')",
		"ordered_at > now() - interval '30 days'",
		"ordered_at < now()",
		"amount * quantity > 100",
		"quantity::numeric * product_id > 100",
	} {
		got := queryFloat(t, conn, "SELECT count(*) FROM orders WHERE "+where)
		near(t, where, got, boundedCount(t, where, 8), tolO)
	}
	wantCode(t, conn, "SELECT count(*) FROM orders WHERE quantity * product_id > 100", "42501", "can exceed type int4")
	wantCode(t, conn, "SELECT count(*) FROM customers WHERE age * 2 > 100", "42501", "can exceed type int4")

	// A bad format fails before the charge, with PostgreSQL's error.
	before := showBudget(t, conn).epsSpent
	wantCode(t, conn, "SELECT count(*) FROM customers WHERE signup_date >= TO_DATE('2023-13-45', 'YYYY-MM-DD')", "22008", "")
	if after := showBudget(t, conn).epsSpent; after != before {
		t.Errorf("a failing TO_DATE was charged: ε spent %v -> %v", before, after)
	}

	// knex binds the LIKE pattern: a good one is answered, one ending in
	// the escape character is refused before the charge.
	sql := "select count(*) from \"customers\" where \"region\" like $1"
	var n float64
	if err := conn.QueryRow(ctx, sql, pgx.QueryExecModeExec, "nor%").Scan(&n); err != nil {
		t.Fatalf("%s with 'nor%%': %v", sql, err)
	}
	near(t, "bound LIKE 'nor%'", n, queryFloat(t, up, "SELECT count(*)::numeric FROM customers WHERE region LIKE 'nor%'"), tolC)
	before = showBudget(t, conn).epsSpent
	err := conn.QueryRow(ctx, sql, pgx.QueryExecModeExec, `nor\`).Scan(&n)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "escape character") {
		t.Errorf("%s with a pattern ending in the escape character: %v, want 42501 about the escape character", sql, err)
	}
	if after := showBudget(t, conn).epsSpent; after != before {
		t.Errorf("a bad bound LIKE pattern was charged: ε spent %v -> %v", before, after)
	}
	if err := conn.QueryRow(ctx, "select count(*) from customers where lower(region) like lower($1)", pgx.QueryExecModeExec, "%OR%").Scan(&n); err != nil {
		t.Errorf("LIKE lower($1): %v", err)
	}
}

func TestToolsThreePartNames(t *testing.T) {
	conn := sqlConn(t)
	up := direct(t)
	var db string
	if err := up.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{db}.Sanitize()
	setEps(t, conn, "4")
	// psqlODBC (Excel MS Query): a private table, a public one, a catalog.
	near(t, "count over a three-part name", queryFloat(t, conn, "SELECT count(*) FROM "+q+".public.customers"), 2000, 0.25*tail)
	if n, err := countRows(conn, "SELECT name FROM "+q+".public.products WHERE product_id < 6"); err != nil || n != 5 {
		t.Errorf("public table by a three-part name: %d rows, %v; want 5", n, err)
	}
	if _, err := countRows(conn, "SELECT table_name FROM "+q+".information_schema.tables WHERE table_schema = 'public'"); err != nil {
		t.Errorf("catalog by a three-part name: %v", err)
	}
	wantCode(t, conn, "SELECT count(*) FROM otherdb.public.customers", "0A000", `cross-database references are not implemented: "otherdb.public.customers"`)
	// Directly, PostgreSQL says the same.
	if _, err := up.Exec(ctx, "SELECT count(*) FROM otherdb.public.customers"); err == nil || !strings.Contains(err.Error(), `cross-database references are not implemented: "otherdb.public.customers"`) {
		t.Errorf("PostgreSQL's own wording changed: %v", err)
	}
}
