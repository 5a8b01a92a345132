package rewrite

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// testRelations is what the upstream's catalog would say about the tables
// of testConfig (internal/testconf/catalog.yaml).
var testRelations = func() map[string]*Relation {
	rels, _ := testconf.Catalog()
	out := make(map[string]*Relation, len(rels))
	for name, r := range rels {
		out[name] = &Relation{Columns: r.Columns, UniqueKeys: r.UniqueKeys}
	}
	return out
}()

// TestJoinsBounded: a private table is joined with a public one only where
// each private row matches at most one public row (joins.go), judged after
// CTEs and derived tables are inlined.
func TestJoinsBounded(t *testing.T) {
	a := newTestAnalyzer(t)
	ok := []string{
		// primary key, either order, ON or USING, inner or outer
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id",
		"SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id",
		"SELECT count(*) FROM orders o LEFT JOIN products p ON p.product_id = o.product_id",
		"SELECT count(*) FROM products p RIGHT JOIN orders o ON p.product_id = o.product_id",
		"SELECT count(*) FROM orders JOIN products USING (product_id)",
		"SELECT count(*) FROM orders LEFT JOIN products USING (product_id) WHERE price > 10",
		// other unique keys; a composite one needs all its columns
		"SELECT count(*) FROM orders o JOIN products p ON p.id = o.product_id",
		"SELECT count(*) FROM orders o JOIN products p ON p.name = o.sku AND p.category = o.region",
		"SELECT count(*) FROM orders o JOIN products p ON p.name = o.sku AND p.category = 'audio'",
		// more conditions beside the key, and unqualified columns
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id AND p.price > 10",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id AND p.category = o.region",
		"SELECT count(*) FROM orders o JOIN products p ON id = quantity",
		// a constant or a parameter as the key
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = 3",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = $1",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = '3'::int",
		// the same table several times, each on its key; a chain through a bound table
		"SELECT count(*) FROM orders o JOIN products p1 ON p1.product_id = o.product_id JOIN products p2 ON p2.product_id = o.product_id JOIN products p3 ON p3.id = o.quantity",
		"SELECT count(*) FROM orders o JOIN products p1 ON p1.product_id = o.product_id JOIN products p2 ON p2.id = p1.product_id",
		"SELECT count(*) FROM orders o LEFT JOIN (products p1 JOIN products p2 ON p2.id = p1.id) ON p1.product_id = o.product_id",
		// comma joins with the key in WHERE
		"SELECT count(*) FROM orders o, products p WHERE p.product_id = o.product_id",
		"SELECT count(*) FROM orders o, products p WHERE o.amount > 5 AND (p.product_id = o.product_id AND p.price < 10)",
		"SELECT count(*) FROM orders o CROSS JOIN products p WHERE p.product_id = o.product_id",
		// schema-qualified names
		"SELECT count(*) FROM public.orders JOIN public.products ON public.products.product_id = public.orders.product_id",
		// CTEs and derived tables are judged on what they inline to
		"WITH c AS (SELECT p.product_id AS pid, p.category FROM products p) SELECT c.category, count(*) FROM orders o JOIN c ON c.pid = o.product_id GROUP BY c.category",
		"WITH c AS (SELECT * FROM products) SELECT count(*) FROM orders o JOIN c ON c.product_id = o.product_id",
		"WITH c AS (SELECT * FROM products p WHERE p.product_id = 5) SELECT count(*) FROM orders o JOIN c ON true",
		"WITH c AS (SELECT p.product_id, q.category FROM products p JOIN products q ON q.id = p.id) SELECT count(*) FROM orders o JOIN c ON c.product_id = o.product_id",
		"SELECT t.category, count(*) FROM (SELECT o.amount, p.category FROM orders o JOIN products p ON p.product_id = o.product_id) t GROUP BY t.category",
		"WITH t AS (SELECT o.amount, o.product_id FROM orders o) SELECT count(*) FROM t JOIN products p ON p.product_id = t.product_id",
	}
	for _, sql := range ok {
		if _, err := a.Analyze(sql); err != nil {
			t.Errorf("Analyze(%q) = %v, want accepted", sql, err)
		}
	}
	refused := []string{
		// the attack: copies of a public table multiplying the matching rows
		"SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = 42 JOIN products c2 ON true JOIN products c3 ON true JOIN products c4 ON true JOIN products c5 ON true",
		"SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = 42 AND o.region LIKE 'nor%' JOIN products c2 ON true",
		"SELECT count(*) FROM orders o JOIN products p ON true",
		"SELECT count(*) FROM orders o CROSS JOIN products p",
		"SELECT count(*) FROM orders o, products p",
		"SELECT count(*) FROM orders o, products p WHERE p.price > o.amount",
		"SELECT count(*) FROM orders o LEFT JOIN products p ON true",
		"SELECT count(*) FROM orders o LEFT JOIN products p ON true WHERE p.product_id = o.product_id",
		// not a unique key, half a composite key, not an equality, not a conjunct
		"SELECT count(*) FROM orders o JOIN products p ON p.category = o.region",
		"SELECT count(*) FROM orders o JOIN products p ON p.name = o.sku",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id >= o.product_id",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id OR p.id = o.product_id",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id IS NOT DISTINCT FROM o.product_id",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id::text = o.sku",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = p.id",
		// a key compared as float could match several keys
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.score",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.quantity::float8",
		// a table bound only through an unbound one
		"SELECT count(*) FROM orders o JOIN products p1 ON true JOIN products p2 ON p2.product_id = p1.product_id AND p1.product_id = p2.product_id",
		// an outer join's condition does not bound its preserved side
		"SELECT count(*) FROM (orders o JOIN products p1 ON true) LEFT JOIN products p2 ON p2.product_id = o.product_id AND p1.product_id = p2.product_id",
		// CTEs and derived tables that inline to an unbounded join
		"WITH c AS (SELECT * FROM products) SELECT count(*) FROM orders o JOIN c ON true",
		"WITH c AS (SELECT p.product_id FROM products p, products q) SELECT count(*) FROM orders o JOIN c ON c.product_id = o.product_id",
		"WITH c AS (SELECT * FROM products WHERE category = 'audio') SELECT count(*) FROM orders o JOIN c ON c.category = o.region",
		"SELECT count(*) FROM (SELECT o.amount FROM orders o JOIN products p ON true) t",
		"SELECT count(*) FROM (SELECT o.amount FROM orders o, products p) t",
		"WITH t AS (SELECT o.customer_id FROM orders o CROSS JOIN products p) SELECT count(*) FROM t",
	}
	for _, sql := range refused {
		_, err := a.Analyze(sql)
		var re *RejectError
		switch {
		case err == nil:
			t.Errorf("Analyze(%q) accepted, want 0A000 naming public.products", sql)
		case !errors.As(err, &re) || re.Code != pgerr.FeatureNotSupported || !strings.Contains(re.Message, "public table public.products must be joined on a unique key"):
			t.Errorf("Analyze(%q) = %v, want 0A000 naming public.products", sql, err)
		case !strings.Contains(re.Hint, "(product_id)") || re.Position == 0:
			t.Errorf("Analyze(%q): hint %q, position %d: want the unique keys and a position", sql, re.Hint, re.Position)
		}
	}
}

// TestJoinsWithoutCatalog: a public table whose unique keys are unknown (no
// index, or the catalog could not be read) cannot be joined at all.
func TestJoinsWithoutCatalog(t *testing.T) {
	a := newTestAnalyzer(t)
	a = New(a.cfg, Options{})
	for _, sql := range []string{
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id",
		"SELECT count(*) FROM orders JOIN products USING (product_id)",
	} {
		_, err := a.Analyze(sql)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.FeatureNotSupported || !strings.Contains(re.Hint, "no primary key or unique index") {
			t.Errorf("Analyze(%q) without catalog = %v, want 0A000 saying products has no known key", sql, err)
		}
	}
	if _, err := a.Analyze("SELECT count(*) FROM orders"); err != nil {
		t.Errorf("a query without joins needs no catalog: %v", err)
	}
}

// TestLikePatternBounded: a LIKE pattern's cost is its length times each
// matching value's, so long patterns are refused in private queries.
func TestLikePatternBounded(t *testing.T) {
	a := newTestAnalyzer(t)
	ok := "SELECT count(*) FROM orders WHERE region LIKE '%" + strings.Repeat("é", maxLikePattern-2) + "%'"
	if _, err := a.Analyze(ok); err != nil {
		t.Errorf("a pattern of %d characters: %v", maxLikePattern, err)
	}
	for _, sql := range []string{
		"SELECT count(*) FROM orders WHERE region LIKE '%" + strings.Repeat("a", maxLikePattern) + "%'",
		"SELECT count(*) FILTER (WHERE channel ILIKE '" + strings.Repeat("_", maxLikePattern+1) + "') FROM orders",
		"SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id WHERE p.name NOT LIKE '" + strings.Repeat("x%", 100) + "'",
	} {
		_, err := a.Analyze(sql)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.FeatureNotSupported || !strings.Contains(re.Message, "at most 128 characters") {
			t.Errorf("Analyze(%.60q...) = %v, want 0A000 on the pattern's length", sql, err)
		}
	}
}
