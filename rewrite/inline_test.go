package rewrite

import (
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// perUnitClauses parses a rewritten query and returns, deparsed, the WHERE
// of its per-unit pre-aggregation (the SELECT that reads the private
// table) and the ON conditions of its joins.
func perUnitClauses(t *testing.T, sql string) (where string, ons []string) {
	t.Helper()
	tree, err := pg_query.Parse(sql)
	if err != nil {
		t.Fatalf("rewritten SQL does not parse: %v\n%s", err, sql)
	}
	found := false
	walk(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		sel, ok := m.Interface().(*pg_query.SelectStmt)
		if !ok || found {
			return !found
		}
		reads := false
		for _, f := range sel.FromClause {
			walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
				switch x := m.Interface().(type) {
				case *pg_query.RangeSubselect:
					return false
				case *pg_query.RangeVar:
					reads = reads || x.Relname == "orders"
				case *pg_query.JoinExpr:
					if x.Quals != nil {
						s, err := deparseExpr(x.Quals)
						if err != nil {
							t.Fatal(err)
						}
						ons = append(ons, s)
					}
				}
				return true
			})
		}
		if !reads {
			ons = nil
			return true
		}
		found = true
		if sel.WhereClause != nil {
			if where, err = deparseExpr(sel.WhereClause); err != nil {
				t.Fatal(err)
			}
		}
		return false
	})
	if !found {
		t.Fatalf("no per-unit SELECT reading orders in\n%s", sql)
	}
	return where, ons
}

// TestInliningKeepsMeaning: a CTE or derived table that the rewrite
// inlines means what it meant as a subquery (issue 12; found by the
// semantic differential test, e2e/semantic_test.go). Its WHERE filters
// only its own rows: on the nullable side of an outer join it becomes part
// of that join's ON, never of the outer WHERE (which would turn the outer
// join into an inner one). Its column references keep pointing at its own
// relation when they are read in the outer query's scope, where another
// relation may have a column of the same name.
func TestInliningKeepsMeaning(t *testing.T) {
	a := newTestAnalyzer(t)
	cases := []struct {
		name, sql string
		// inOn must be in some join's ON, inWhere in the WHERE; notInWhere
		// must not be in the WHERE.
		inOn, inWhere, notInWhere []string
	}{
		{
			name:       "public CTE on the nullable side of LEFT JOIN",
			sql:        "WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders o LEFT JOIN c ON c.product_id = o.product_id",
			inOn:       []string{"products.category = 'audio'"},
			notInWhere: []string{"category"},
		},
		{
			name:       "public CTE on the nullable side of RIGHT JOIN",
			sql:        "WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM c RIGHT JOIN orders o ON c.product_id = o.product_id",
			inOn:       []string{"products.category = 'audio'"},
			notInWhere: []string{"category"},
		},
		{
			name:       "public CTE with star on the nullable side, grouped by its column",
			sql:        "WITH c AS (SELECT * FROM products WHERE price < 120) SELECT c.category, count(*) FROM orders o LEFT JOIN c ON c.product_id = o.product_id GROUP BY c.category",
			inOn:       []string{"products.price < 120"},
			notInWhere: []string{"price"},
		},
		{
			name:       "public CTE inside an inner join on the nullable side",
			sql:        "WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders o LEFT JOIN (c JOIN products q ON q.product_id = c.product_id) ON c.product_id = o.product_id",
			inOn:       []string{"products.category = 'audio'"},
			notInWhere: []string{"category"},
		},
		{
			name:    "public CTE in an inner join",
			sql:     "WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders o JOIN c ON c.product_id = o.product_id",
			inWhere: []string{"products.category = 'audio'"},
		},
		{
			name:       "private derived table on the preserved side",
			sql:        "SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 1) o LEFT JOIN products p ON p.product_id = o.product_id",
			inWhere:    []string{"orders.quantity > 1"},
			notInWhere: []string{"p."},
		},
		{
			name: "public CTE column named like a private column",
			sql:  "WITH c AS (SELECT product_id, category FROM products) SELECT c.category, count(*) FROM orders o LEFT JOIN c ON c.product_id = o.product_id GROUP BY c.category",
			inOn: []string{"products.product_id = o.product_id"},
		},
		{
			name:    "private derived table's unqualified column shared with a joined table",
			sql:     "SELECT count(*) FROM (SELECT * FROM orders WHERE product_id < 30) o JOIN products p ON p.product_id = o.product_id",
			inWhere: []string{"orders.product_id < 30"},
		},
		{
			name:    "renamed column of a private CTE",
			sql:     "WITH big AS (SELECT customer_id, amount AS amt, region FROM orders WHERE amount > 100) SELECT region, avg(amt) FROM big GROUP BY region",
			inWhere: []string{"orders.amount > 100"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sts, err := a.Analyze(c.sql)
			if err != nil {
				t.Fatalf("Analyze(%q): %v", c.sql, err)
			}
			where, ons := perUnitClauses(t, sts[0].Plan.SQL)
			for _, s := range c.inOn {
				if !strings.Contains(strings.Join(ons, " | "), s) {
					t.Errorf("Analyze(%q): no ON holds %q; ONs %q, WHERE %q", c.sql, s, ons, where)
				}
			}
			for _, s := range c.inWhere {
				if !strings.Contains(where, s) {
					t.Errorf("Analyze(%q): WHERE %q does not hold %q", c.sql, where, s)
				}
			}
			for _, s := range c.notInWhere {
				if strings.Contains(where, s) {
					t.Errorf("Analyze(%q): WHERE %q holds %q, which belongs to the join", c.sql, where, s)
				}
			}
		})
	}
}

// TestInliningRefusesWhatItCannotPlace: a nullable-side CTE's WHERE cannot
// join a USING join's condition (it has none to extend), so the query is
// refused rather than answered with another meaning.
func TestInliningRefusesWhatItCannotPlace(t *testing.T) {
	a := newTestAnalyzer(t)
	sql := "WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders LEFT JOIN c USING (product_id)"
	_, err := a.Analyze(sql)
	var re *RejectError
	if !asReject(err, &re) || re.Code != pgerr.FeatureNotSupported {
		t.Fatalf("Analyze(%q) = %v, want a 0A000 refusal", sql, err)
	}
}

// TestOrderByKeyIsSortedByTheDatabase: ORDER BY a group key is left to the
// post-processing query, which PostgreSQL runs with the session's
// collation, DateStyle and type order; the proxy's own sort of released
// rows compares numbers and bytes, and put '2' before '10' for a text key
// (found by the semantic differential test).
func TestOrderByKeyIsSortedByTheDatabase(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, sql := range []string{
		"SELECT product_id::text AS k, count(*) FROM orders GROUP BY 1 ORDER BY 1 LIMIT 3",
		"SELECT date_trunc('month', ordered_at) AS month, count(*) FROM orders GROUP BY 1 ORDER BY month DESC",
		"SELECT region, count(*) FROM orders GROUP BY region ORDER BY count(*) DESC, region",
	} {
		sts, err := a.Analyze(sql)
		if err != nil {
			t.Fatalf("Analyze(%q): %v", sql, err)
		}
		p := sts[0].Plan
		if p.Post == nil || p.Post.OrderBy == "" || len(p.OrderBy) != 0 {
			t.Errorf("Analyze(%q): post %+v, proxy order %v; want the order in the post-processing query", sql, p.Post, p.OrderBy)
		}
	}
	// Aggregates are numbers, which the proxy sorts as PostgreSQL does.
	sts, err := a.Analyze("SELECT region, count(*) FROM orders GROUP BY region ORDER BY 2 DESC")
	if err != nil {
		t.Fatal(err)
	}
	if p := sts[0].Plan; p.Post != nil || len(p.OrderBy) != 1 {
		t.Errorf("ORDER BY an aggregate: post %+v, order %v; want the proxy's own sort", p.Post, p.OrderBy)
	}
}

// TestClampKeepsNull: PostgreSQL's GREATEST and LEAST ignore NULL
// arguments, so least(greatest(x, lo), hi) is lo when x is NULL, and a
// clamped SUM, AVG, VARIANCE or quantile counted every NULL argument (a
// CASE without ELSE, a nullable column) as the lower bound, while COUNT
// did not (found by the semantic differential test: an AVG 9% too
// high). Every clamp is NULL when its argument is.
func TestClampKeepsNull(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, sql := range []string{
		"SELECT avg(CASE WHEN region = 'north' THEN amount END) FROM orders",
		"SELECT sum(discount), variance(discount) FROM orders",
		"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM orders",
		"SELECT width_bucket(amount, 0, 500, 5), count(*) FROM orders GROUP BY 1",
	} {
		sts, err := a.Analyze(sql)
		if err != nil {
			t.Fatalf("Analyze(%q): %v", sql, err)
		}
		tree, err := pg_query.Parse(sts[0].Plan.SQL)
		if err != nil {
			t.Fatal(err)
		}
		clamps := 0
		var visit func(m protoreflect.Message, guarded bool)
		visit = func(m protoreflect.Message, guarded bool) {
			switch x := m.Interface().(type) {
			case *pg_query.CaseExpr:
				if len(x.Args) == 1 {
					if nt := x.Args[0].GetCaseWhen().GetExpr().GetNullTest(); nt != nil && nt.Nulltesttype == pg_query.NullTestType_IS_NULL {
						guarded = true
					}
				}
				if len(x.Args) == 2 {
					// clampSQL: CASE WHEN x > hi THEN hi WHEN x < lo THEN lo
					// ELSE x END is NULL for a NULL x when its ELSE is x;
					// bucketSQL's ELSE width_bucket(...) must be guarded.
					cmp := x.Args[0].GetCaseWhen().GetExpr().GetAExpr()
					if cmp != nil && x.Args[1].GetCaseWhen().GetExpr().GetAExpr() != nil {
						clamps++
						fc := x.Defresult.GetFuncCall()
						switch {
						case fc != nil && fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval() == "width_bucket":
							if !guarded {
								t.Errorf("Analyze(%q): a bucket is not NULL when its argument is:\n%s", sql, sts[0].Plan.SQL)
							}
						case !sameExpr(x.Defresult, cmp.Lexpr):
							t.Errorf("Analyze(%q): a CASE clamp's ELSE is not its argument:\n%s", sql, sts[0].Plan.SQL)
						}
					}
				}
			case *pg_query.FuncCall:
				// least(width_bucket(...), n) of a NULL is n: it must be
				// guarded.
				if x.Funcname[len(x.Funcname)-1].GetString_().GetSval() == "width_bucket" && !guarded && strings.Contains(sts[0].Plan.SQL, "least(width_bucket") {
					t.Errorf("Analyze(%q): least(width_bucket(...)) is not NULL when its argument is:\n%s", sql, sts[0].Plan.SQL)
				}
			case *pg_query.MinMaxExpr:
				if x.Op == pg_query.MinMaxOp_IS_LEAST && len(x.Args) == 2 && x.Args[0].GetMinMaxExpr() != nil {
					clamps++
					if !guarded {
						t.Errorf("Analyze(%q): a clamp is not NULL when its argument is:\n%s", sql, sts[0].Plan.SQL)
					}
					return
				}
			}
			children(m, "", func(c protoreflect.Message) { visit(c, guarded) })
		}
		visit(tree.ProtoReflect(), false)
		if clamps == 0 {
			t.Errorf("Analyze(%q): no clamp found in\n%s", sql, sts[0].Plan.SQL)
		}
	}
}

// sameExpr reports whether a and b deparse to the same text.
func sameExpr(a, b *pg_query.Node) bool {
	sa, err1 := deparseExpr(a)
	sb, err2 := deparseExpr(b)
	return err1 == nil && err2 == nil && sa == sb
}
