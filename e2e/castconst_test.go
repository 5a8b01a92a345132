package e2e

import (
	"fmt"
	"testing"
)

// TestCastConstantsAreTheirCastValues: a constant written through a cast
// is the value after the cast. 0.4::int4 is 0 and 0.04::numeric(2,1) is
// 0.0, so a division by one of them fails on exactly the rows present: the
// rewrite used to read the literal under the cast (0.4, non-zero) and
// accept it, and a person's presence decided between an answer and XX000
// after the charge (red team, issue 14). Now they are refused before
// anything runs, the same for a present and an absent person, in both
// protocols, and nothing is charged.
func TestCastConstantsAreTheirCastValues(t *testing.T) {
	attacks := []string{
		`SELECT sum(quantity / 0.4::int4) FROM orders WHERE customer_id = %d`,
		`SELECT sum(amount / 0.04::numeric(2,1)) FROM orders WHERE customer_id = %d`,
		`SELECT quantity / 0.4::int4 AS k, count(*) FROM orders WHERE customer_id = %d GROUP BY 1`,
		`SELECT count(CASE WHEN customer_id = %d THEN quantity / 0.4::int4 END) FROM orders`,
		`SELECT width_bucket(amount, 0.4::int4, 0.6::int4, 5) AS b, count(*) FROM orders WHERE customer_id = %d GROUP BY 1`,
	}
	for _, m := range attackModes[:2] {
		conn := connectAt(t, env.proxyAddr, "carol", pwCarol, m.mode)
		for _, a := range attacks {
			before := showBudget(t, conn)
			for _, who := range []int{presentCustomer, absentCustomer} {
				sql := fmt.Sprintf(a, who)
				rows, err := conn.Query(ctx, sql)
				if err == nil {
					for rows.Next() {
					}
					rows.Close()
					err = rows.Err()
				}
				checkCode(t, m.name+": "+sql, err, "42501")
			}
			if after := showBudget(t, conn); after != before {
				t.Errorf("%s: %s charged %+v -> %+v", m.name, a, before, after)
			}
		}
	}
}
