package rewrite

import (
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Bounding the work one person's rows can cause (docs/threat-model.md,
// "Timing"): the analyst sees how long a private query takes, so nothing
// in it may make the time depend much on one person's rows. Joins are
// bounded in joins.go; LIKE patterns here.

// maxLikePattern bounds a LIKE/ILIKE pattern in a query over a private
// table, in characters. Matching costs up to about the pattern's length
// times the value's for every row that reaches it, so a long pattern turns
// one person's long text value into a slow query (measured on PostgreSQL
// 15: a 2,000-character pattern takes 73 ms on one 40,000-character value,
// a 126-character one 5 ms, equality 0.6 ms), and the running time tells
// whether that person's row is there. Real filters ("contains", "starts
// with") are far shorter.
const maxLikePattern = 128

// boundedWork refuses what would let one person's rows multiply a private
// query's work: joins that are not many-to-one (joins.go) and long LIKE
// patterns. It runs on the flattened statement.
func (p *planner) boundedWork(sel *pg_query.SelectStmt) error {
	if err := p.boundedJoins(sel); err != nil {
		return err
	}
	var err error
	walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
		e, ok := m.Interface().(*pg_query.A_Expr)
		if !ok || err != nil || !likeExpr(e) {
			return err == nil
		}
		// A pattern that is not a literal is evaluated before the charge
		// and its value checked against the same bound (CheckPattern).
		if c := likeLiteral(e.Rexpr); c != nil {
			if n := utf8.RuneCountInString(c.GetSval().GetSval()); n > maxLikePattern {
				err = reject(pgerr.FeatureNotSupported, c.Location, "a LIKE pattern over a private table may have at most %d characters, this one has %d: "+
					"matching a long pattern costs time in proportion to each matching person's values, which the running time would reveal", maxLikePattern, n)
			}
		}
		return err == nil
	})
	return err
}

// likeExpr reports whether e matches a pattern, however it is spelled:
// LIKE, ILIKE, or their operators ~~, ~~*, !~~, !~~* (red team, issue 14:
// the operator spelling skipped the length bound), also with ANY or ALL.
func likeExpr(e *pg_query.A_Expr) bool {
	switch e.Kind {
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
		return true
	case pg_query.A_Expr_Kind_AEXPR_OP, pg_query.A_Expr_Kind_AEXPR_OP_ANY, pg_query.A_Expr_Kind_AEXPR_OP_ALL:
		return len(e.Name) == 1 && likeOps[e.Name[0].GetString_().GetSval()]
	}
	return false
}
