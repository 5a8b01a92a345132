package dp_test

import (
	"testing"

	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// newTestAnalyzer is the rewriter as the rewrite package's own tests run
// it: the Rewrite entry of internal/testconf and its catalog, no database.
func newTestAnalyzer(t testing.TB) *rewrite.Analyzer {
	t.Helper()
	cfg, err := testconf.Get(testconf.Rewrite).Parse(func(string) string { return "" })
	if err != nil {
		t.Fatalf("test configuration: %v", err)
	}
	rels, types := testconf.Catalog()
	relations := make(map[string]*rewrite.Relation, len(rels))
	for name, r := range rels {
		relations[name] = &rewrite.Relation{Columns: r.Columns, UniqueKeys: r.UniqueKeys}
	}
	// The database and numeric typmods as rewrite's tests have them
	// (rewrite/rewrite_test.go, newTestAnalyzer).
	return rewrite.New(cfg, rewrite.Options{Relations: relations, ColumnTypes: types, Database: "shop",
		NumericTypmods: map[string][2]int{"public.orders.amount": {10, 2}},
		// amount is NOT NULL, as in the demo and e2e schema (internal/demo/schema.sql).
		NotNull: map[string]bool{"public.orders.amount": true}})
}
