package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The DP forms of what tools ask (issue 14, item 5): SELECT DISTINCT key
// (Grafana template variables, Metabase field values) and GROUP BY key
// without aggregates, answered as the keys released by partition
// selection. On the demo data, channel 'phone' is one customer's and
// 'web' and 'app' thousands'.

// carolNotices is a simple-protocol connection as carol that collects
// the NOTICEs it receives.
func carolNotices(t *testing.T) (*pgx.Conn, func() []string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://carol:%s@%s:%s/shop?sslmode=disable", url.QueryEscape(pwCarol), host, port))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	var notices []string
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := notices
		notices = nil
		return out
	}
}

// column reads the first column of every row, as text.
func column(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals[0]))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func TestDistinctKeyOfOnePersonIsNeverReleased(t *testing.T) {
	conn, notices := carolNotices(t)
	queries := []string{
		"SELECT DISTINCT channel FROM orders ORDER BY 1",              // Grafana template variable
		"SELECT DISTINCT channel FROM orders WHERE amount > 0",        // Metabase field values with a filter
		"SELECT channel FROM orders GROUP BY channel",                 // GROUP BY without aggregates
		"SELECT DISTINCT channel AS v, region FROM orders ORDER BY 1", // multi-column
	}
	for _, q := range queries {
		// Fresh noise each time: a different ε is a different question.
		for _, eps := range []string{"1", "1.25", "1.5"} {
			if _, err := conn.Exec(ctx, "SET dp.epsilon = "+eps); err != nil {
				t.Fatal(err)
			}
			before := showBudget(t, conn)
			notices()
			got := column(t, conn, q)
			seen := map[string]bool{}
			for _, v := range got {
				seen[v] = true
			}
			if seen["phone"] {
				t.Errorf("%s at ε=%s: the channel of a single customer was released: %v", q, eps, got)
			}
			if !seen["web"] || !seen["app"] {
				t.Errorf("%s at ε=%s: common channels missing: %v", q, eps, got)
			}
			if strings.Contains(q, "ORDER BY 1") {
				for i := 1; i < len(got); i++ {
					if got[i-1] > got[i] {
						t.Errorf("%s: not sorted: %v", q, got)
					}
				}
			} else if len(got) != len(seen) {
				t.Errorf("%s: a key released twice: %v", q, got)
			}
			after := showBudget(t, conn)
			if d := after.epsSpent - before.epsSpent; d < 0.999*parseF(eps) || d > 1.001*parseF(eps) {
				t.Errorf("%s at ε=%s: charged ε=%g, want the whole ε (all of it to the selection)", q, eps, d)
			}
			ns := notices()
			if len(ns) != 1 || !strings.Contains(ns[0], "keys only") || !strings.Contains(ns[0], "partition selection") || !strings.Contains(ns[0], "charged ε="+eps) {
				t.Errorf("%s at ε=%s: NOTICE %q, want one saying keys only, partition selection and the charge", q, eps, ns)
			}
		}
	}
}

func parseF(s string) float64 {
	var f float64
	fmt.Sscan(s, &f)
	return f
}

// A key with public values: every configured value is listed whatever
// the rows hold, so no private row influences the answer and nothing is
// charged; the NOTICE says so.
func TestDistinctPublicValuesChargeNothing(t *testing.T) {
	conn, notices := carolNotices(t)
	for _, q := range []string{
		"SELECT DISTINCT region FROM orders",
		"SELECT region FROM orders WHERE amount > 400 GROUP BY region ORDER BY region",
	} {
		before := showBudget(t, conn)
		notices()
		got := column(t, conn, q)
		if len(got) != 4 {
			t.Errorf("%s: got %v, want the four public regions", q, got)
		}
		after := showBudget(t, conn)
		if after.epsSpent != before.epsSpent || after.deltaSpent != before.deltaSpent {
			t.Errorf("%s: charged ε=%g δ=%g, want nothing", q, after.epsSpent-before.epsSpent, after.deltaSpent-before.deltaSpent)
		}
		if ns := notices(); len(ns) != 1 || !strings.Contains(ns[0], "no private row influences this answer") {
			t.Errorf("%s: NOTICE %q", q, ns)
		}
	}
}

func TestExplainDPOfPublicDistinctSaysNothingIsRead(t *testing.T) {
	conn, _ := carolNotices(t)
	text := strings.Join(column(t, conn, "EXPLAIN DP SELECT DISTINCT region FROM orders"), "\n")
	for _, want := range []string{"Charge: ε=0 δ=0", "no private row influences this answer", "Nothing reads the table"} {
		if !strings.Contains(text, want) {
			t.Errorf("EXPLAIN DP lacks %q:\n%s", want, text)
		}
	}
}

func TestExplainDPOfDistinct(t *testing.T) {
	conn, _ := carolNotices(t)
	before := showBudget(t, conn)
	text := strings.Join(column(t, conn, "EXPLAIN DP SELECT DISTINCT channel FROM orders ORDER BY 1"), "\n")
	for _, want := range []string{"0 aggregate(s) and partition selection", "Partition selection: a group is released when"} {
		if !strings.Contains(text, want) {
			t.Errorf("EXPLAIN DP lacks %q:\n%s", want, text)
		}
	}
	if after := showBudget(t, conn); after.epsSpent != before.epsSpent {
		t.Errorf("EXPLAIN DP charged ε=%g", after.epsSpent-before.epsSpent)
	}
}

func TestDistinctRefusals(t *testing.T) {
	conn, _ := carolNotices(t)
	for q, want := range map[string]string{
		"SELECT DISTINCT customer_id FROM orders":                        "42501",
		"SELECT DISTINCT ON (channel) channel, amount FROM orders":       "0A000",
		"SELECT DISTINCT channel, count(*) FROM orders GROUP BY channel": "0A000",
	} {
		_, err := conn.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != want {
			t.Errorf("%s: %v, want SQLSTATE %s", q, err, want)
		}
		if err := conn.Ping(ctx); err != nil {
			t.Fatalf("connection unusable after refusal: %v", err)
		}
	}
}

// UNION ALL of DP queries (Grafana's filter-value API): each branch
// answered on its own, the sum of their charges charged once, the NOTICE
// saying so.
func TestUnionAllOfDistinctIsAnsweredBranchByBranch(t *testing.T) {
	conn, notices := carolNotices(t)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql    string
		charge float64
	}{
		// channel through partition selection, region's public values free
		{"SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT region FROM orders", 1},
		{"SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT channel FROM orders WHERE amount > 1", 2},
	} {
		before := showBudget(t, conn)
		notices()
		got := column(t, conn, c.sql)
		seen := map[string]int{}
		for _, v := range got {
			seen[v]++
		}
		if seen["phone"] > 0 || seen["web"] == 0 || seen["app"] == 0 {
			t.Errorf("%s: %v", c.sql, got)
		}
		if c.charge == 1 && (seen["north"] != 1 || seen["west"] != 1) {
			t.Errorf("%s: public regions missing: %v", c.sql, got)
		}
		if c.charge == 2 && seen["web"] != 2 {
			t.Errorf("%s: want web from both branches: %v", c.sql, got)
		}
		after := showBudget(t, conn)
		if d := after.epsSpent - before.epsSpent; d < c.charge-1e-9 || d > c.charge+1e-9 {
			t.Errorf("%s: charged ε=%g, want %g (the sum of the branches)", c.sql, d, c.charge)
		}
		ns := notices()
		if len(ns) != 1 || !strings.Contains(ns[0], "the charge is the sum") || !strings.Contains(ns[0], fmt.Sprintf("charged ε=%g", c.charge)) {
			t.Errorf("%s: NOTICE %q", c.sql, ns)
		}
	}
}

func TestUnionAllOrderLimitAndTypes(t *testing.T) {
	conn, _ := carolNotices(t)
	got := column(t, conn, "SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT region FROM orders ORDER BY v DESC LIMIT 3")
	if len(got) != 3 || got[0] != "west" || got[1] != "web" || !(got[2] < got[1]) {
		t.Errorf("ORDER BY v DESC LIMIT 3 over the union = %v, want west, web, then the next value down", got)
	}
	// bigint and numeric branches: the union's column is numeric, as
	// PostgreSQL unifies them.
	rows, err := conn.Query(ctx, "SELECT count(*) AS n FROM orders UNION ALL SELECT sum(amount) FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	if fd := rows.FieldDescriptions(); len(fd) != 1 || fd[0].Name != "n" || fd[0].DataTypeOID != 1700 {
		t.Errorf("row description %+v, want one numeric column n", fd)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n != 2 {
		t.Errorf("%d rows, %v; want 2", n, err)
	}
}

func TestUnionAllExtendedProtocolAndExplain(t *testing.T) {
	host, port, _ := net.SplitHostPort(env.proxyAddr)
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://carol:%s@%s:%s/shop?sslmode=disable", url.QueryEscape(pwCarol), host, port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT count(*) FROM orders WHERE amount > $1 UNION ALL SELECT count(*) FROM orders WHERE amount > $2 + 1", 10, 400)
	if err != nil {
		t.Fatal(err)
	}
	var counts []int64
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil || len(counts) != 2 || counts[0] <= counts[1] {
		t.Errorf("counts %v (%v), want two, the first larger", counts, err)
	}
	before := showBudget(t, conn)
	text := strings.Join(column(t, conn, "EXPLAIN DP SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT channel FROM orders WHERE amount > 1"), "\n")
	if !strings.Contains(text, "UNION ALL of 2 DP queries") || !strings.Contains(text, "Branch 2:") {
		t.Errorf("EXPLAIN DP of a union:\n%s", text)
	}
	if after := showBudget(t, conn); after.epsSpent != before.epsSpent {
		t.Errorf("EXPLAIN DP charged ε=%g", after.epsSpent-before.epsSpent)
	}
}

// All or nothing: a union whose total exceeds the per-query maximum is
// refused before any branch runs, nothing charged; other set operations
// are refused with a usable connection.
func TestUnionAllRefusals(t *testing.T) {
	conn, _ := carolNotices(t)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 3"); err != nil { // max_epsilon_per_query is 5
		t.Fatal(err)
	}
	before := showBudget(t, conn)
	for q, want := range map[string]string{
		"SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM orders WHERE amount > 1":             "22023",
		"SELECT DISTINCT channel FROM orders UNION SELECT DISTINCT channel FROM orders WHERE amount > 1": "0A000",
		"SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM products":                            "0A000",
		"SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM orders ORDER BY count(*) + 1":        "0A000",
	} {
		_, err := conn.Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != want {
			t.Errorf("%s: %v, want SQLSTATE %s", q, err, want)
		}
		if err := conn.Ping(ctx); err != nil {
			t.Fatalf("connection unusable after refusal: %v", err)
		}
	}
	if after := showBudget(t, conn); after.epsSpent != before.epsSpent {
		t.Errorf("refused unions charged ε=%g", after.epsSpent-before.epsSpent)
	}
}

// The branches' values are printed as the union's column type, as
// PostgreSQL prints them: a date branch under a timestamptz column.
func TestUnionAllValuesInTheUnionsType(t *testing.T) {
	conn, _ := carolNotices(t)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	q := "SELECT date_trunc('year', ordered_at) AS y FROM orders GROUP BY 1 UNION ALL SELECT date_trunc('year', ordered_at)::date FROM orders GROUP BY 1"
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	if fd := rows.FieldDescriptions(); len(fd) != 1 || fd[0].DataTypeOID != 1184 {
		t.Fatalf("row description %+v, want one timestamptz column", fd)
	}
	n := 0
	for rows.Next() {
		n++
		if raw := string(rows.RawValues()[0]); !strings.HasSuffix(raw, "+00") {
			t.Errorf("value %q is not printed as a timestamptz", raw)
		}
	}
	if err := rows.Err(); err != nil || n == 0 || n%2 != 0 {
		t.Errorf("%d rows, %v", n, err)
	}
}
