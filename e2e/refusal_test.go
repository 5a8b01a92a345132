package e2e

import (
	"testing"
)

// TestRefusals sends each class of SPEC §5 refusal and checks the SQLSTATE,
// that no row came back, that nothing was charged and that the connection
// still answers.
func TestRefusals(t *testing.T) {
	conn := connect(t, "carol", pwCarol)
	cases := []struct{ name, sql, codes string }{
		{"select star", "SELECT * FROM orders", "42501"},
		{"row columns", "SELECT customer_id, amount FROM orders", "42501"},
		{"bare column", "SELECT amount FROM orders", "42501"},
		{"qualified star", "SELECT o.* FROM public.orders o", "42501"},
		{"insert", "INSERT INTO orders (customer_id, product_id, region, channel, quantity, amount, ordered_at) VALUES (1, 1, 'x', 'y', 1, 1, now())", "42501"},
		{"update", "UPDATE orders SET amount = 0", "42501"},
		{"delete", "DELETE FROM orders", "42501"},
		{"drop", "DROP TABLE orders", "42501"},
		{"create", "CREATE TABLE x (a int)", "42501"},
		{"copy", "COPY orders TO STDOUT", "42501"},
		{"mixed multi-statement", "SELECT count(*) FROM orders; SELECT * FROM orders", "42501"},
		{"pg_sleep", "SELECT pg_sleep(0.01)", "42501 0A000"},
		{"setseed", "SELECT setseed(0.5)", "42501 0A000"},
		{"pg_stats", "SELECT * FROM pg_stats", "42501"},
		{"pg_statistic", "SELECT * FROM pg_catalog.pg_statistic", "42501"},
		{"pg_stats_ext", "SELECT * FROM pg_stats_ext", "42501"},
		{"plain explain", "EXPLAIN SELECT count(*) FROM orders", "42501"},
		{"group by unit", "SELECT customer_id, count(*) FROM orders GROUP BY customer_id", "42501"},
		{"unbounded sum", "SELECT sum(product_id) FROM orders", "42501"},
		{"unlisted aggregate", "SELECT max(amount) FROM orders", "42501 0A000"},
		{"unconfigured table", "SELECT count(*) FROM secret_things", "42501"},
		{"private subquery", "SELECT avg(n) FROM (SELECT customer_id, count(*) n FROM orders GROUP BY customer_id) t", "42501 0A000"},
		{"private CTE", "WITH t AS (SELECT * FROM orders) SELECT count(*) FROM t a JOIN t b ON a.customer_id = b.customer_id", "42501 0A000"},
		{"set operation", "SELECT count(*) FROM orders UNION SELECT count(*) FROM customers", "42501 0A000"},
		{"exists from public", "SELECT count(*) FROM products p WHERE EXISTS (SELECT 1 FROM orders o WHERE o.product_id = p.product_id AND o.amount > 400)", "42501 0A000"},
		{"division", "SELECT count(*) FROM orders WHERE 100 / (amount - 42) > 1", "42501 0A000"},
		{"cast of a column", "SELECT count(*) FROM orders WHERE region::int > 1", "42501 0A000"},
		{"function in where", "SELECT count(*) FROM orders WHERE length(channel) > 3", "42501 0A000"},
		{"system column", "SELECT count(ctid) FROM orders", "42501"},
		{"set seed", "SET seed = 0.5", "42501"},
		{"search_path", "SET search_path = evil", "42501"},
		{"syntax", "SELEC count(*) FROM orders", "42601"},
	}
	before := showBudget(t, conn)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := conn.Query(ctx, c.sql)
			n := 0
			if err == nil {
				for rows.Next() {
					n++
				}
				rows.Close()
				err = rows.Err()
			}
			if n > 0 {
				t.Errorf("%s: returned %d rows before the error", c.sql, n)
			}
			checkCode(t, c.sql, err, c.codes)
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("connection unusable after %q: %v", c.sql, err)
			}
		})
	}
	if after := showBudget(t, conn); after != before {
		t.Errorf("refused queries charged the budget: %+v -> %+v", before, after)
	}
}
