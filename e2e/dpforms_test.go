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
