package e2e

import (
	"strings"
	"testing"
)

// TestLikeAnyAndOperatorSpellings: the pattern checks hold however a
// pattern match is written (red team, second pass of issue 14). LIKE ANY
// / ILIKE ANY / NOT LIKE ALL of an array in HAVING were not checked: the
// pre-charge EXPLAIN moved them into WHERE and matched each pattern
// against the column's statistics, so 'w\' (a prefix of the most common
// value web) failed for free while 'x\' was answered. And the operator
// spelling ~~ skipped the 128-character bound that keeps a match's time
// from depending on one person's long value. Both are refused now, the
// same for every pattern, and nothing is charged.
func TestLikeAnyAndOperatorSpellings(t *testing.T) {
	if _, err := direct(t).Exec(ctx, "ANALYZE orders"); err != nil {
		t.Fatal(err)
	}
	long := "%" + strings.Repeat("a", 200)
	queries := []string{
		`SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel ILIKE ANY (ARRAY['w\'])`,
		`SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel ILIKE ANY (ARRAY['x\'])`,
		`SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel LIKE ANY (ARRAY['_e\'])`,
		`SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel NOT LIKE ALL (ARRAY['_p\', 'q'])`,
		`SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel ~~* ANY (ARRAY['a\'])`,
		`SELECT count(*) FROM orders WHERE channel ~~ '` + long + `b'`,
		`SELECT count(*) FROM orders WHERE channel ~~* '` + long + `b'`,
	}
	for _, m := range attackModes[:2] {
		conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
		before := showBudget(t, conn)
		for _, q := range queries {
			rows, err := conn.Query(ctx, q)
			if err == nil {
				for rows.Next() {
				}
				rows.Close()
				err = rows.Err()
			}
			code := "42501"
			if q[len(q)-2] == 'b' {
				code = "0A000"
			}
			checkCode(t, m.name+": "+q, err, code)
		}
		if after := showBudget(t, conn); after != before {
			t.Errorf("%s: the refused pattern queries were charged: %+v -> %+v", m.name, before, after)
		}
	}
}
