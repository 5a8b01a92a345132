package rewrite

import pg_query "github.com/pganalyze/pg_query_go/v5"

// PostgreSQL's GREATEST and LEAST ignore NULL arguments, so the clamp
// least(greatest(x, lo), hi) is lo, not NULL, when x is NULL: a clamped
// SUM, AVG, VARIANCE or quantile then counted each NULL argument (a
// nullable column, a CASE without ELSE) as the lower bound while COUNT
// skipped it, and a clamped width_bucket key put NULLs into the first
// bucket. The semantic differential test (e2e/semantic_test.go) found it.
// Every clamp is therefore guarded: NULL in, NULL out. A non-NULL value
// is clamped exactly as before, so the bounds, and the sensitivity, are
// unchanged.

// nullSafeSQL is CASE WHEN (x) IS NULL THEN NULL ELSE clamp END, for the
// clamp of x written as SQL text.
func nullSafeSQL(x, clamp string) string {
	return "CASE WHEN (" + x + ") IS NULL THEN NULL ELSE " + clamp + " END"
}

// nullSafeNode is nullSafeSQL as a parse tree: x is the unclamped
// expression (copied into the test), clamp its clamp.
func nullSafeNode(x, clamp *pg_query.Node) *pg_query.Node {
	test := &pg_query.Node{Node: &pg_query.Node_NullTest{NullTest: &pg_query.NullTest{
		Arg: x, Nulltesttype: pg_query.NullTestType_IS_NULL, Location: -1}}}
	null := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Isnull: true, Location: -1}}}
	return &pg_query.Node{Node: &pg_query.Node_CaseExpr{CaseExpr: &pg_query.CaseExpr{
		Args:      []*pg_query.Node{{Node: &pg_query.Node_CaseWhen{CaseWhen: &pg_query.CaseWhen{Expr: test, Result: null, Location: -1}}}},
		Defresult: clamp, Location: -1}}}
}
