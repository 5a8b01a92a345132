package rewrite

import (
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The checks of conditions (WHERE, FILTER, join conditions, CASE WHEN):
// only conditions that cannot fail for any row.

func aExprKindName(k pg_query.A_Expr_Kind) string {
	switch k {
	case pg_query.A_Expr_Kind_AEXPR_OP_ANY:
		return "op ANY (...)"
	case pg_query.A_Expr_Kind_AEXPR_OP_ALL:
		return "op ALL (...)"
	case pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		return "IS [NOT] DISTINCT FROM"
	case pg_query.A_Expr_Kind_AEXPR_NULLIF:
		return "NULLIF"
	}
	return k.String()
}

// conditions checks the join conditions and WHERE; their checked forms
// replace them in the rewrite once nothing else reads the statement.
func (p *planner) conditions(sel *pg_query.SelectStmt) error {
	for _, q := range p.quals {
		out, _, err := p.where(q)
		if err != nil {
			return err
		}
		p.tot.replaceLater(q, out)
	}
	if sel.WhereClause != nil {
		out, _, err := p.where(sel.WhereClause)
		if err != nil {
			return err
		}
		p.tot.replaceLater(sel.WhereClause, out)
	}
	return nil
}

// pred checks a condition. Only conditions that cannot fail for any row
// are allowed: comparisons of total values (comparable), IN, BETWEEN, IS
// [NOT] DISTINCT FROM, IS [NOT] NULL, boolean tests and LIKE with a
// constant, valid pattern.
func (p *planner) pred(n *pg_query.Node) (texpr, error) {
	if t, ok, err := p.constant(n); ok {
		if err == nil && t.slot > 0 {
			p.tot.check(t.slot, []string{"bool"}, "used as a condition")
		}
		return t, err
	}
	tname := p.table.QualifiedName()
	switch x := n.GetNode().(type) {
	case *pg_query.Node_BoolExpr:
		c := proto.Clone(x.BoolExpr).(*pg_query.BoolExpr)
		var d deps
		for i, a := range c.Args {
			t, err := p.pred(a)
			if err != nil {
				return texpr{}, err
			}
			c.Args[i], d = t.out, d|t.deps
		}
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_BoolExpr{BoolExpr: c}}, typ: "bool", deps: d}, nil
	case *pg_query.Node_AExpr:
		return p.aExpr(x.AExpr)
	case *pg_query.Node_NullTest:
		t, err := p.operand(x.NullTest.Arg)
		if err != nil {
			return texpr{}, err
		}
		c := proto.Clone(x.NullTest).(*pg_query.NullTest)
		c.Arg = t.out
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_NullTest{NullTest: c}}, typ: "bool", deps: t.deps}, nil
	case *pg_query.Node_BooleanTest:
		t, err := p.pred(x.BooleanTest.Arg)
		if err != nil {
			return texpr{}, err
		}
		c := proto.Clone(x.BooleanTest).(*pg_query.BooleanTest)
		c.Arg = t.out
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_BooleanTest{BooleanTest: c}}, typ: "bool", deps: t.deps}, nil
	case *pg_query.Node_SubLink:
		return texpr{}, reject(pgerr.FeatureNotSupported, x.SubLink.Location, "subqueries are not supported in queries over private table %s", tname)
	case *pg_query.Node_FuncCall:
		if isAggregate(x.FuncCall) {
			_, name := funcName(x.FuncCall)
			return texpr{}, reject(pgerr.InsufficientPrivilege, x.FuncCall.Location, "aggregate %s is not allowed in WHERE on private table %s", name, tname)
		}
	}
	return p.expr(n, true)
}

func (p *planner) aExpr(e *pg_query.A_Expr) (texpr, error) {
	tname := p.table.QualifiedName()
	if len(e.Name) != 1 || e.Name[0].GetString_() == nil {
		return texpr{}, reject(pgerr.FeatureNotSupported, e.Location, "qualified operators (OPERATOR(...)) are not supported on private table %s", tname)
	}
	op := e.Name[0].GetString_().GetSval()
	switch e.Kind {
	case pg_query.A_Expr_Kind_AEXPR_OP:
		switch {
		case arithmeticOps[op]:
			return p.operand(&pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: e}})
		case e.Lexpr == nil || e.Rexpr == nil:
		case comparisonOps[op]:
			return p.comparison(e, []*pg_query.Node{e.Rexpr})
		case likeOps[op]:
			return p.like(e)
		case regexOps[op]:
			return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "regular expression operator %s is not allowed on private table %s", op, tname)
		}
		return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "operator %s is not allowed in WHERE on private table %s", op, tname)
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
		return p.like(e)
	case pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "SIMILAR TO is not allowed on private table %s", tname)
	case pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		return p.comparison(e, []*pg_query.Node{e.Rexpr})
	case pg_query.A_Expr_Kind_AEXPR_IN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		if l := e.Rexpr.GetList(); l != nil {
			return p.comparison(e, l.Items)
		}
		return p.comparison(e, []*pg_query.Node{e.Rexpr})
	}
	return texpr{}, reject(pgerr.FeatureNotSupported, e.Location, "%s is not supported in WHERE on private table %s", aExprKindName(e.Kind), tname)
}

// operand checks an operand of a condition: a value expression, or
// arithmetic whose operands' types make it total, printed as written
// (condarith.go). Arithmetic nested deeper (inside a function or CASE)
// would be computed in numeric to be total (arith), which in a condition
// could change which rows match (a float's rounding, an integer
// division): refused there.
func (p *planner) operand(n *pg_query.Node) (texpr, error) {
	if e := n.GetAExpr(); e != nil && e.Kind == pg_query.A_Expr_Kind_AEXPR_OP && len(e.Name) == 1 &&
		arithmeticOps[e.Name[0].GetString_().GetSval()] && !isConstant(n) {
		// An operand that is arithmetic: printed as written, if total
		// for its operands' types (condarith.go).
		return p.condArith(e)
	}
	var err error
	replaceNodes(n, func(x *pg_query.Node) bool {
		if err != nil || x.GetSubLink() != nil {
			return true
		}
		if e := x.GetAExpr(); e != nil && e.Kind == pg_query.A_Expr_Kind_AEXPR_OP && len(e.Name) == 1 &&
			arithmeticOps[e.Name[0].GetString_().GetSval()] && !isConstant(x) {
			err = reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic (%s) on a column is refused in conditions on private table %s: overflow or division errors would depend on private values",
				e.Name[0].GetString_().GetSval(), p.table.QualifiedName())
		}
		return isConstant(x)
	})
	if err != nil {
		return texpr{}, err
	}
	return p.expr(n, true)
}

// comparison checks x op y (or x IN (...), x BETWEEN a AND b): each right
// side compared with x.
func (p *planner) comparison(e *pg_query.A_Expr, rights []*pg_query.Node) (texpr, error) {
	left, err := p.operand(e.Lexpr)
	if err != nil {
		return texpr{}, err
	}
	c := proto.Clone(e).(*pg_query.A_Expr)
	c.Lexpr = left.out
	d := left.deps
	outs := make([]*pg_query.Node, len(rights))
	parts := []texpr{left}
	for i, r := range rights {
		right, err := p.operand(r)
		if err != nil {
			return texpr{}, err
		}
		if err := p.compared(left, right, e.Location); err != nil {
			return texpr{}, err
		}
		outs[i], d = right.out, d|right.deps
		parts = append(parts, right)
	}
	if e.Kind == pg_query.A_Expr_Kind_AEXPR_IN && len(rights) > 1 {
		// PostgreSQL converts x and every value of the list to one common
		// type, per row when the conversion is not immutable (a date in a
		// list with a timestamptz): each pair comparing safely is not
		// enough, the whole list must unify totally, as CASE branches do
		// (red team).
		if _, _, err := p.unifyChecked(parts, "the values of an IN list", e.Location); err != nil {
			return texpr{}, err
		}
	}
	if l := c.Rexpr.GetList(); l != nil {
		l.Items = outs
	} else {
		c.Rexpr = outs[0]
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, typ: "bool", deps: d}, nil
}

// compared checks that a and b may be compared (comparable); a side bound
// per execution gets a type check instead.
func (p *planner) compared(a, b texpr, loc int32) error {
	aRun, bRun := a.slot > 0 || len(a.via) > 0, b.slot > 0 || len(b.via) > 0
	switch {
	case aRun && bRun:
		// Both typed at run time: each must be comparable with the
		// other's possible types; require one type family, any.
		return reject(pgerr.InsufficientPrivilege, loc, "comparing %s with %s is refused on private table %s: neither side's type is known before the query runs",
			describe(a.out), describe(b.out), p.table.QualifiedName())
	case aRun:
		p.slotCompared(a, b)
		return nil
	case bRun:
		p.slotCompared(b, a)
		return nil
	case a.typ == unknownType || b.typ == unknownType:
		return nil
	case !comparable(a.typ, b.typ, a.lit, b.lit):
		return reject(pgerr.InsufficientPrivilege, loc, "comparing %s (%s) with %s (%s) is refused on private table %s: PostgreSQL would convert one side in a way that can fail on some values",
			describe(a.out), shownType(a.typ), describe(b.out), shownType(b.typ), p.table.QualifiedName()).
			WithHint("Cast the constant side to the column's type.")
	}
	return nil
}

// slotCompared records the types a value bound per execution may have to
// be compared with other.
func (p *planner) slotCompared(run, other texpr) {
	if other.typ == unknownType || other.typ == "" {
		return
	}
	for _, s := range append([]int{run.slot}, run.via...) {
		if s > 0 {
			p.tot.check(s, comparableTypes(other.typ), "compared with "+describe(other.out)+" ("+other.typ+")")
		}
	}
}

// like checks x LIKE pattern. PostgreSQL reports a malformed pattern (one
// ending in the escape character) only when matching reaches that point,
// so whether it fails depends on the rows: the pattern must be a constant
// string, checked here.
func (p *planner) like(e *pg_query.A_Expr) (texpr, error) {
	tname := p.table.QualifiedName()
	left, err := p.operand(e.Lexpr)
	if err != nil {
		return texpr{}, err
	}
	if f := scalarTypes[left.typ]; left.typ != "" && left.typ != unknownType && left.slot == 0 && f != famString {
		return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "LIKE on %s (%s) is refused on private table %s: only strings may be matched", describe(e.Lexpr), shownType(left.typ), tname)
	}
	c := likeLiteral(e.Rexpr)
	if tc := e.Rexpr.GetTypeCast(); c == nil && tc != nil && tc.Arg.GetAConst() != nil {
		// 'p\h'::varchar(2) is 'p\', '%\ '::bpchar is '%\' as text: the
		// text PostgreSQL matches is not the literal's.
		return texpr{}, reject(pgerr.InsufficientPrivilege, tc.Location, "a LIKE pattern over private table %s may be cast only to text or to varchar without a length: a cast to %s changes the text PostgreSQL matches (it may cut or trim it), so dpproxy could not check it", tname, typeNameString(tc.TypeName))
	}
	if c == nil {
		// A parameter or constant expression ($1, lower($1), '%' || $1 ||
		// '%'): bound per execution, a string, its value checked by the
		// proxy before the charge (TypeCheck.Pattern).
		t, ok, err := p.constant(e.Rexpr)
		if err != nil {
			return texpr{}, err
		}
		if !ok || t.slot == 0 && len(t.via) == 0 {
			return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "a LIKE pattern must be a constant string or a parameter on private table %s: an invalid pattern would fail depending on private values", tname)
		}
		for _, s := range append([]int{t.slot}, t.via...) {
			if s > 0 {
				p.tot.checkPattern(s)
			}
		}
		out := proto.Clone(e).(*pg_query.A_Expr)
		out.Lexpr, out.Rexpr = left.out, t.out
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: out}}, typ: "bool", deps: left.deps | t.deps}, nil
	}
	if !validLikePattern(c.GetSval().GetSval()) {
		return texpr{}, reject(pgerr.InsufficientPrivilege, c.Location, "LIKE pattern must not end with escape character")
	}
	out := proto.Clone(e).(*pg_query.A_Expr)
	out.Lexpr = left.out
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: out}}, typ: "bool", deps: left.deps}, nil
}

// postPattern checks a LIKE, ILIKE or regular expression in the
// post-processing (HAVING, ORDER BY, outputs). It runs on released values
// after the charge, but the original statement is planned before the
// charge (proxy/precharge.go), and PostgreSQL moves a HAVING condition on
// a group key into WHERE, where estimating its selectivity matches the
// pattern against the column's statistics (most common values, histogram
// bounds): a pattern that fails on some of them only would answer for
// free. So the pattern must be a literal, valid and short, as in WHERE;
// regular expressions and SIMILAR TO are refused here too.
func (p *planner) postPattern(e *pg_query.A_Expr) error {
	tname := p.table.QualifiedName()
	op := ""
	if len(e.Name) == 1 {
		op = e.Name[0].GetString_().GetSval()
	}
	switch {
	case (e.Kind == pg_query.A_Expr_Kind_AEXPR_OP_ANY || e.Kind == pg_query.A_Expr_Kind_AEXPR_OP_ALL) && (likeOps[op] || regexOps[op]):
		// LIKE ANY (ARRAY[...]) and the like: every pattern of the array
		// would be matched against the statistics too (red team, issue 14).
		return reject(pgerr.InsufficientPrivilege, e.Location, "LIKE, ILIKE and regular expressions with ANY or ALL are not allowed over the results of a query over private table %s: write each pattern as its own LIKE, combined with OR or AND", tname)
	case e.Kind == pg_query.A_Expr_Kind_AEXPR_SIMILAR, regexOps[op]:
		return reject(pgerr.InsufficientPrivilege, e.Location, "regular expressions and SIMILAR TO are not allowed on private table %s", tname)
	case e.Kind == pg_query.A_Expr_Kind_AEXPR_LIKE, e.Kind == pg_query.A_Expr_Kind_AEXPR_ILIKE, e.Kind == pg_query.A_Expr_Kind_AEXPR_OP && likeOps[op]:
	default:
		return nil
	}
	c := likeLiteral(e.Rexpr)
	if c == nil {
		return reject(pgerr.InsufficientPrivilege, e.Location, "a LIKE pattern over the results of a query over private table %s must be a string literal (cast, if at all, to text or varchar without a length)", tname)
	}
	if !validLikePattern(c.GetSval().GetSval()) {
		return reject(pgerr.InsufficientPrivilege, c.Location, "LIKE pattern must not end with escape character")
	}
	if n := utf8.RuneCountInString(c.GetSval().GetSval()); n > maxLikePattern {
		return reject(pgerr.FeatureNotSupported, c.Location, "a LIKE pattern over a private table may have at most %d characters, this one has %d", maxLikePattern, n)
	}
	return nil
}

// likeLiteral returns the string literal a LIKE pattern is, when the text
// PostgreSQL matches is exactly the literal's: a plain string, or one
// cast to text or to varchar without a length (the operator takes text,
// and neither cast changes a byte). Any other cast changes the text
// (varchar(n) and char(n) cut it, bpchar drops trailing spaces when it
// becomes text, name cuts it to 63 bytes): such a pattern is not a
// literal, and like() refuses it or has it evaluated and checked as the
// value the operator receives.
func likeLiteral(n *pg_query.Node) *pg_query.A_Const {
	if tc := n.GetTypeCast(); tc != nil {
		t, ok := castType(tc.TypeName)
		if !ok || (t != "text" && t != "varchar") || len(tc.TypeName.Typmods) > 0 || tc.TypeName.TypeOid != 0 {
			return nil
		}
		n = tc.Arg
	}
	if c := n.GetAConst(); c != nil && c.GetSval() != nil {
		return c
	}
	return nil
}

// validLikePattern reports whether every backslash escapes a character.
func validLikePattern(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+1 >= len(s) {
				return false
			}
			i++
		}
	}
	return true
}
