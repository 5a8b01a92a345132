package rewrite

import (
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// TestToolHint: the shapes tools write get their tool's hint, and
// hand-written queries that only resemble them in part get none.
func TestToolHint(t *testing.T) {
	cases := []struct{ sql, want string }{
		{`SELECT * FROM orders WHERE 1 = 0`, "column probe"},
		{`SELECT * FROM orders WHERE false`, "column probe"},
		{`SELECT * FROM orders WHERE 1 <> 1`, "column probe"},
		{`SELECT * FROM orders LIMIT 0`, "column probe"},
		{`SELECT * FROM orders WHERE 1 = 1`, ""},
		{`SELECT * FROM orders WHERE 1 = 1 LIMIT 5000`, ""},
		{`SELECT ordered_at AS time, amount FROM orders`, "Grafana panel"},
		{`SELECT "public"."orders"."amount" AS "amount" FROM "public"."orders" LIMIT 2000`, "Metabase"},
		{`SELECT "public"."orders"."amount" FROM "public"."orders" LIMIT 2000`, ""},
		{`SELECT o.amount AS amount FROM orders o LIMIT 2000`, ""},
		{`SELECT amount, region FROM orders LIMIT 50`, "Grafana's query builder"},
		{`SELECT amount FROM orders LIMIT 51`, ""},
		{`SELECT t.* FROM orders t LIMIT 200`, "data viewer"},
		{`SELECT * FROM orders LIMIT 100000`, ""},
		{`SELECT * FROM orders UNION ALL SELECT * FROM orders LIMIT 100`, ""},
	}
	for _, c := range cases {
		tree, err := pg_query.Parse(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		got := toolHint(tree.Stmts[0].Stmt.GetSelectStmt())
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: hint %q, want one with %q", c.sql, got, c.want)
		}
	}
}
