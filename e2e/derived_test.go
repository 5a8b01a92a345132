package e2e

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestAvgDerivedFromSumAndCount: a query with COUNT(x), SUM(x) and AVG(x)
// of the same rows releases AVG as the released SUM over the released
// COUNT (post-processing): every row has AVG = SUM/COUNT exactly, and
// the query is charged the session's ε as before, split among two noised
// parts instead of three (EXPLAIN DP says so).
//
// The second query is the demo's: count(*) counts the same rows as
// count(amount) because amount is NOT NULL, which the proxy reads from
// the upstream's catalog at start.
func TestAvgDerivedFromSumAndCount(t *testing.T) {
	for _, q := range []string{
		"SELECT region, count(amount), sum(amount), avg(amount) FROM orders WHERE amount > 1 GROUP BY region",
		"SELECT region, count(*), sum(amount), avg(amount) FROM orders WHERE amount > 2 GROUP BY region",
	} {
		t.Run("", func(t *testing.T) { checkAvgDerived(t, q) })
	}
}

func checkAvgDerived(t *testing.T, q string) {
	conn := connect(t, "alice", pwAlice)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	var explain []string
	rows, err := conn.Query(ctx, "EXPLAIN DP "+q)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		explain = append(explain, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(explain, "\n")
	if !strings.Contains(text, "ε split in 2 equal share(s): 2 aggregate(s) (1 more derived from them, free)") ||
		!strings.Contains(text, "derived as sum(amount) / count(") {
		t.Errorf("EXPLAIN DP does not show avg derived:\n%s", text)
	}

	spent := func() float64 {
		v, err := strconv.ParseFloat(ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'alice'`), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := spent()
	rows, err = conn.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var region, count, sum string
		var avg *string
		if err := rows.Scan(&region, &count, &sum, &avg); err != nil {
			t.Fatal(err)
		}
		n++
		c, err1 := strconv.ParseFloat(count, 64)
		s, err2 := strconv.ParseFloat(sum, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %s: count %q sum %q", region, count, sum)
		}
		if c == 0 {
			if avg != nil {
				t.Errorf("row %s: count 0 but avg %q, want NULL", region, *avg)
			}
			continue
		}
		if avg == nil {
			t.Errorf("row %s: avg NULL with count %v", region, c)
			continue
		}
		a, err := strconv.ParseFloat(*avg, 64)
		if err != nil || a != s/c {
			t.Errorf("row %s: avg %q, want sum/count = %s/%s = %v", region, *avg, sum, count, s/c)
		}
		if a < 0 || a > 500 {
			t.Errorf("row %s: avg %v outside the bounds [0, 500]", region, a)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d rows, want the 4 public regions", n)
	}
	if d := spent() - before; d < 0.5-1e-9 || d > 0.5+1e-9 {
		t.Errorf("charged ε=%v, want the session's 0.5", d)
	}
}

// noticeBar is the NOTICE's 95% bar of Laplace noise with scale
// l0·lInf/eps, plus round (0.5 for a count, shown as an integer), at
// three significant digits rounded up (dp's barText).
func noticeBar(l0, lInf, eps, round float64) string {
	v := l0*lInf/eps*math.Log(20) + round
	e := math.Pow(10, math.Floor(math.Log10(v))-2)
	r, _ := strconv.ParseFloat(strconv.FormatFloat(math.Ceil(v/e*(1-1e-12))*e, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}
