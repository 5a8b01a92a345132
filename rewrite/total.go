package rewrite

import (
	"math"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
)

// The checker of a private query's expressions: every WHERE, FILTER and
// join condition, every CASE, group key and aggregate argument is checked
// here against the totality table (totality.go), its constants hoisted
// (hoist.go), and returned as it is to be printed in the rewrite.

// Operators of conditions on a private table.
var (
	comparisonOps = map[string]bool{"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true}
	likeOps       = map[string]bool{"~~": true, "!~~": true, "~~*": true, "!~~*": true}
	arithmeticOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "^": true}
	regexOps      = map[string]bool{"~": true, "~*": true, "!~": true, "!~*": true}
)

// unknownType is the type of a column when the analyzer was given no
// column types (Options.ColumnTypes nil: tests of the rewrite's shape).
// Type-dependent checks then fall back to what holds for the types the
// demo and tests use; a proxy always reads the types.
const unknownType = "?"

// texpr is a checked expression.
type texpr struct {
	out  *pg_query.Node // as printed in the rewrite
	typ  string         // type name; "" for an untyped literal or NULL
	deps deps
	// lit is set for a literal, converted once when the query is parsed
	// or planned, never per row.
	lit bool
	// slot is the parameter number when the value is bound per execution
	// (a client parameter or a hoisted constant): its type is checked
	// when the query runs (TypeCheck).
	slot int
	// via are such parameters whose type is the value's (a CASE whose
	// only typed branches are parameters).
	via []int
}

// value checks an expression evaluated on every row of the private table
// (a GROUP BY key, an aggregate's argument) and returns it as it must be
// printed in the rewrite.
func (p *planner) value(n *pg_query.Node, key bool) (*pg_query.Node, deps, error) {
	t, err := p.expr(n, key)
	return t.out, t.deps, err
}

// where checks a condition (WHERE, FILTER, a join condition) and returns
// it as it must be printed in the rewrite.
func (p *planner) where(n *pg_query.Node) (*pg_query.Node, deps, error) {
	t, err := p.pred(n)
	return t.out, t.deps, err
}

// expr checks a value expression: a column, a constant (hoist.go), or a
// cast, CASE, COALESCE, function or arithmetic of the totality table over
// columns. key is set for group keys and comparison operands, where
// division is refused (under the numeric cast, integer division would
// change meaning).
func (p *planner) expr(n *pg_query.Node, key bool) (texpr, error) {
	if t, ok, err := p.constant(n); ok {
		return t, err
	}
	tname := p.table.QualifiedName()
	switch x := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		c, err := p.column(x.ColumnRef)
		if err != nil {
			return texpr{}, err
		}
		typ, err := p.columnType(x.ColumnRef, c)
		if err != nil {
			return texpr{}, err
		}
		return texpr{out: n, typ: typ, deps: depColumn}, nil
	case *pg_query.Node_TypeCast:
		arg, err := p.expr(x.TypeCast.Arg, key)
		if err != nil {
			return texpr{}, err
		}
		to, ok := castType(x.TypeCast.TypeName)
		if !ok || len(x.TypeCast.TypeName.Typmods) > 0 {
			return texpr{}, reject(CodeForbidden, x.TypeCast.Location, "a cast of a column to type %s is refused on private table %s: it can fail depending on private values", typeNameString(x.TypeCast.TypeName), tname)
		}
		if !castOK(arg.typ, to) {
			return texpr{}, reject(CodeForbidden, x.TypeCast.Location, "a cast of %s (%s) to %s is refused on private table %s: it can fail depending on private values (casts that cannot: to text, widening numbers, timestamps to date)", describe(x.TypeCast.Arg), shownType(arg.typ), to, tname)
		}
		c := proto.Clone(x.TypeCast).(*pg_query.TypeCast)
		c.Arg = arg.out
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: c}}, typ: to, deps: arg.deps}, nil
	case *pg_query.Node_CaseExpr:
		return p.caseExpr(x.CaseExpr, key)
	case *pg_query.Node_CoalesceExpr:
		c := proto.Clone(x.CoalesceExpr).(*pg_query.CoalesceExpr)
		var parts []texpr
		var d deps
		for i, a := range c.Args {
			t, err := p.expr(a, key)
			if err != nil {
				return texpr{}, err
			}
			c.Args[i], d = t.out, d|t.deps
			parts = append(parts, t)
		}
		typ, via, err := p.unifyChecked(parts, "the arguments of COALESCE", c.Location)
		if err != nil {
			return texpr{}, err
		}
		return texpr{out: &pg_query.Node{Node: &pg_query.Node_CoalesceExpr{CoalesceExpr: c}}, typ: typ, deps: d, via: via}, nil
	case *pg_query.Node_FuncCall:
		return p.valueFunc(x.FuncCall, key)
	case *pg_query.Node_AExpr:
		if x.AExpr.Kind == pg_query.A_Expr_Kind_AEXPR_OP && len(x.AExpr.Name) == 1 && arithmeticOps[x.AExpr.Name[0].GetString_().GetSval()] {
			return p.arith(x.AExpr, key)
		}
		// A condition used as a value (count(amount > 5), CASE x WHEN ...).
		return p.pred(n)
	case *pg_query.Node_BoolExpr, *pg_query.Node_NullTest, *pg_query.Node_BooleanTest:
		return p.pred(n)
	case *pg_query.Node_SubLink:
		return texpr{}, reject(CodeUnsupported, x.SubLink.Location, "subqueries are not supported in queries over private table %s", tname)
	}
	return texpr{}, reject(CodeUnsupported, -1, "%s is not supported in a query over private table %s; use CASE WHEN ... THEN ... END for conditions", describe(n), tname)
}

// castOK reports whether a cast of a value of type from to type to is
// total (castTotal); without column types only casts to text are.
func castOK(from, to string) bool {
	if from == unknownType {
		return to == "text" || to == "varchar"
	}
	return castTotal(from, to)
}

func shownType(t string) string {
	switch t {
	case "":
		return "untyped"
	case unknownType:
		return "type unknown"
	}
	return t
}

// caseExpr checks a CASE: its conditions as conditions, its branches as
// values whose types unify without a failing conversion.
func (p *planner) caseExpr(ce *pg_query.CaseExpr, key bool) (texpr, error) {
	c := proto.Clone(ce).(*pg_query.CaseExpr)
	var d deps
	var subject texpr
	if c.Arg != nil {
		t, err := p.expr(c.Arg, key)
		if err != nil {
			return texpr{}, err
		}
		c.Arg, d, subject = t.out, d|t.deps, t
	}
	var results []texpr
	for _, w := range c.Args {
		cw := w.GetCaseWhen()
		if cw == nil {
			return texpr{}, reject(CodeUnsupported, c.Location, "malformed CASE")
		}
		if c.Arg != nil {
			// CASE x WHEN v: x = v.
			v, err := p.operand(cw.Expr)
			if err != nil {
				return texpr{}, err
			}
			if err := p.compared(subject, v, cw.Location); err != nil {
				return texpr{}, err
			}
			cw.Expr = v.out
		} else {
			cond, err := p.pred(cw.Expr)
			if err != nil {
				return texpr{}, err
			}
			cw.Expr = cond.out
		}
		r, err := p.expr(cw.Result, key)
		if err != nil {
			return texpr{}, err
		}
		cw.Result, d = r.out, d|r.deps|depColumn // the condition reads columns
		results = append(results, r)
	}
	if c.Defresult != nil {
		r, err := p.expr(c.Defresult, key)
		if err != nil {
			return texpr{}, err
		}
		c.Defresult, d = r.out, d|r.deps
		results = append(results, r)
	}
	typ, via, err := p.unifyChecked(results, "the branches of CASE", c.Location)
	if err != nil {
		return texpr{}, err
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_CaseExpr{CaseExpr: c}}, typ: typ, deps: d, via: via}, nil
}

// unifyChecked unifies the types of CASE branches or COALESCE arguments
// (unify) and records, for a branch bound per execution, the types it may
// have. When the only typed branches are such parameters, their type is
// the result's: via lists them, for the checks of what uses the result.
func (p *planner) unifyChecked(parts []texpr, what string, loc int32) (string, []int, error) {
	var types []string
	var lits []bool
	var slots []int
	for _, t := range parts {
		if t.typ == unknownType {
			return unknownType, nil, nil
		}
		if t.slot > 0 || len(t.via) > 0 {
			if t.slot > 0 {
				slots = append(slots, t.slot)
			}
			slots = append(slots, t.via...)
			continue
		}
		types, lits = append(types, t.typ), append(lits, t.lit)
	}
	typ, ok := unify(types, lits)
	if !ok {
		var shown []string
		for _, t := range types {
			shown = append(shown, shownType(t))
		}
		return "", nil, reject(CodeForbidden, loc, "%s have types %s on private table %s: PostgreSQL would convert some to a common type in a way that can fail on some values", what, strings.Join(shown, ", "), p.table.QualifiedName())
	}
	if len(slots) == 0 {
		return typ, nil, nil // "text" when every part is an untyped literal, as in PostgreSQL
	}
	typed := false
	for _, t := range types {
		typed = typed || t != ""
	}
	if !typed {
		// Only untyped literals besides: the bound values' type is the
		// result's.
		return "", slots, nil
	}
	var allowed []string
	for _, name := range boundTypes {
		if _, ok := unify(append(append([]string{}, types...), name), append(append([]bool{}, lits...), false)); ok {
			allowed = append(allowed, name)
		}
	}
	for _, s := range slots {
		p.tot.check(s, allowed, "unified with the other values of "+strings.TrimPrefix(what, "the "))
	}
	return typ, nil, nil
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
		return texpr{}, reject(CodeUnsupported, x.SubLink.Location, "subqueries are not supported in queries over private table %s", tname)
	case *pg_query.Node_FuncCall:
		if isAggregate(x.FuncCall) {
			_, name := funcName(x.FuncCall)
			return texpr{}, reject(CodeForbidden, x.FuncCall.Location, "aggregate %s is not allowed in WHERE on private table %s", name, tname)
		}
	}
	return p.expr(n, true)
}

func (p *planner) aExpr(e *pg_query.A_Expr) (texpr, error) {
	tname := p.table.QualifiedName()
	if len(e.Name) != 1 || e.Name[0].GetString_() == nil {
		return texpr{}, reject(CodeUnsupported, e.Location, "qualified operators (OPERATOR(...)) are not supported on private table %s", tname)
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
			return texpr{}, reject(CodeForbidden, e.Location, "regular expression operator %s is not allowed on private table %s", op, tname)
		}
		return texpr{}, reject(CodeForbidden, e.Location, "operator %s is not allowed in WHERE on private table %s", op, tname)
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
		return p.like(e)
	case pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		return texpr{}, reject(CodeForbidden, e.Location, "SIMILAR TO is not allowed on private table %s", tname)
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
	return texpr{}, reject(CodeUnsupported, e.Location, "%s is not supported in WHERE on private table %s", aExprKindName(e.Kind), tname)
}

// operand checks an operand of a condition: a value expression without
// arithmetic on columns. Such arithmetic is computed in numeric to be total
// (arith), which in a condition could change which rows match (a float's
// rounding, an integer division): refused there, as before.
func (p *planner) operand(n *pg_query.Node) (texpr, error) {
	var err error
	replaceNodes(n, func(x *pg_query.Node) bool {
		if err != nil || x.GetSubLink() != nil {
			return true
		}
		if e := x.GetAExpr(); e != nil && e.Kind == pg_query.A_Expr_Kind_AEXPR_OP && len(e.Name) == 1 &&
			arithmeticOps[e.Name[0].GetString_().GetSval()] && !isConstant(x) {
			err = reject(CodeForbidden, e.Location, "arithmetic (%s) on a column is refused in conditions on private table %s: overflow or division errors would depend on private values",
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
		return reject(CodeForbidden, loc, "comparing %s with %s is refused on private table %s: neither side's type is known before the query runs",
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
		return reject(CodeForbidden, loc, "comparing %s (%s) with %s (%s) is refused on private table %s: PostgreSQL would convert one side in a way that can fail on some values",
			describe(a.out), shownType(a.typ), describe(b.out), shownType(b.typ), p.table.QualifiedName()).
			withHint("Cast the constant side to the column's type.")
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
		return texpr{}, reject(CodeForbidden, e.Location, "LIKE on %s (%s) is refused on private table %s: only strings may be matched", describe(e.Lexpr), shownType(left.typ), tname)
	}
	pat := e.Rexpr
	if tc := pat.GetTypeCast(); tc != nil {
		if t, ok := castType(tc.TypeName); ok && scalarTypes[t] == famString {
			pat = tc.Arg
		}
	}
	c := pat.GetAConst()
	if c == nil || c.GetSval() == nil {
		return texpr{}, reject(CodeForbidden, e.Location, "a LIKE pattern must be a constant string on private table %s: an invalid pattern would fail depending on private values", tname)
	}
	if !validLikePattern(c.GetSval().GetSval()) {
		return texpr{}, reject(CodeForbidden, c.Location, "LIKE pattern must not end with escape character")
	}
	out := proto.Clone(e).(*pg_query.A_Expr)
	out.Lexpr = left.out
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: out}}, typ: "bool", deps: left.deps}, nil
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

func strConst(n *pg_query.Node) (string, bool) {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	c := n.GetAConst()
	if c == nil || c.GetSval() == nil {
		return "", false
	}
	return c.GetSval().GetSval(), true
}

// valueFunc checks a function over column values: the totality table's
// functions only (lower, upper, date_trunc, extract, date_part,
// width_bucket), by the types of their arguments.
func (p *planner) valueFunc(fc *pg_query.FuncCall, key bool) (texpr, error) {
	tname := p.table.QualifiedName()
	schema, name := funcName(fc)
	if isAggregate(fc) {
		return texpr{}, reject(CodeUnsupported, fc.Location, "aggregate %s is not allowed inside a group key, a condition or another aggregate", name)
	}
	if schema != "" && schema != "pg_catalog" || fc.AggDistinct || fc.FuncVariadic || len(fc.AggOrder) > 0 {
		return texpr{}, reject(CodeForbidden, fc.Location, "function %s is not allowed on private table %s", name, tname)
	}
	c := proto.Clone(fc).(*pg_query.FuncCall)
	node := &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: c}}
	switch name {
	case "lower", "upper":
		if len(c.Args) != 1 {
			break
		}
		a, err := p.expr(c.Args[0], key)
		if err != nil {
			return texpr{}, err
		}
		if a.typ != unknownType && a.typ != "" && scalarTypes[a.typ] != famString {
			return texpr{}, reject(CodeForbidden, fc.Location, "%s of %s (%s) is refused on private table %s: only strings", name, describe(c.Args[0]), shownType(a.typ), tname)
		}
		c.Args[0] = a.out
		return texpr{out: node, typ: "text", deps: a.deps}, nil
	case "date_trunc", "date_part", "extract":
		if len(c.Args) != 2 {
			break
		}
		u, ok := strConst(c.Args[0])
		u = strings.ToLower(u)
		a, err := p.expr(c.Args[1], key)
		if err != nil {
			return texpr{}, err
		}
		var units []string
		switch {
		case name == "date_trunc" && (a.typ == "timestamp" || a.typ == "timestamptz" || a.typ == "date" || a.typ == unknownType):
			units = truncUnits
		case name == "extract" && a.typ == unknownType:
			units = everyTypeFields()
		case name == "date_part" && a.typ == unknownType:
			units = intersect(extractFields["timestamp"], extractFields["timestamptz"])
		case name == "extract" || a.typ != "date":
			units = extractFields[a.typ]
		}
		if units == nil {
			hint := ""
			if name == "date_part" && a.typ == "date" {
				hint = " (date_part of a date converts it to timestamp, which fails beyond 294276 AD; use extract)"
			}
			return texpr{}, reject(CodeForbidden, fc.Location, "%s of %s (%s) is refused on private table %s%s", name, describe(c.Args[1]), shownType(a.typ), tname, hint)
		}
		if !ok || !contains(units, u) {
			return texpr{}, reject(CodeForbidden, fc.Location, "%s of %s on private table %s needs a constant unit valid for type %s (%s): PostgreSQL checks the unit only when a row reaches it",
				name, describe(c.Args[1]), tname, shownType(a.typ), strings.Join(units, ", "))
		}
		c.Args[1] = a.out
		typ := "numeric"
		switch name {
		case "date_trunc":
			if lo, hi := truncBounds(a.typ, u); lo != "" || hi != "" {
				c.Args[1] = truncGuard(a.out, lo, hi)
			}
			typ = "timestamptz"
			switch a.typ {
			case "timestamp":
				typ = "timestamp"
			case unknownType:
				typ = unknownType
			}
		case "date_part":
			typ = "float8"
		}
		return texpr{out: node, typ: typ, deps: a.deps}, nil
	case "width_bucket":
		if len(c.Args) != 4 {
			break
		}
		ref := c.Args[0].GetColumnRef()
		lo, hi, _ := p.argBounds(c.Args[0])
		b1, ok1 := numConst(c.Args[1])
		b2, ok2 := numConst(c.Args[2])
		nb, ok3 := numConst(c.Args[3])
		if ref == nil || lo > hi || !ok1 || !ok2 || !ok3 || b1 == b2 || nb < 1 || nb != math.Trunc(nb) || nb >= math.MaxInt32 {
			return texpr{}, reject(CodeForbidden, fc.Location, "width_bucket on private table %s needs a column with bounds and constant, distinct bounds and a positive bucket count", tname)
		}
		if _, _, ok := p.argBounds(c.Args[0]); !ok {
			return texpr{}, reject(CodeForbidden, fc.Location, "width_bucket on private table %s needs a column with lower and upper bounds", tname)
		}
		if _, err := p.expr(c.Args[0], key); err != nil {
			return texpr{}, err
		}
		// Clamping to the column's bounds keeps values in range the same
		// and turns NaN (which width_bucket refuses) into upper. A value
		// at or past the last bound gets count+1, so count may not be
		// 2147483647 (count+1 overflows int4 only for those rows: red
		// team).
		c.Args[0] = clampNode(c.Args[0], lo, hi)
		return texpr{out: node, typ: "int4", deps: depColumn}, nil
	}
	return texpr{}, reject(CodeForbidden, fc.Location, "function %s is not allowed on the values of private table %s: only functions that cannot fail for any value are (lower, upper, date_trunc, extract, date_part, width_bucket), or functions of constants alone", name, tname)
}

// truncGuard is CASE WHEN x >= lo AND x <= hi OR NOT isfinite(x) THEN x
// END: x where date_trunc cannot fail on it, NULL elsewhere. The bounds
// are untyped literals, read as x's type when the query is parsed.
func truncGuard(x *pg_query.Node, lo, hi string) *pg_query.Node {
	cmp := func(op, lit string) *pg_query.Node {
		return pg_query.MakeAExprNode(pg_query.A_Expr_Kind_AEXPR_OP, []*pg_query.Node{pg_query.MakeStrNode(op)},
			proto.Clone(x).(*pg_query.Node), pg_query.MakeAConstStrNode(lit, -1), -1)
	}
	var in []*pg_query.Node
	if lo != "" {
		in = append(in, cmp(">=", lo))
	}
	if hi != "" {
		in = append(in, cmp("<=", hi))
	}
	inRange := in[0]
	if len(in) > 1 {
		inRange = pg_query.MakeBoolExprNode(pg_query.BoolExprType_AND_EXPR, in, -1)
	}
	finite := &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
		Funcname:   []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("isfinite")},
		Args:       []*pg_query.Node{proto.Clone(x).(*pg_query.Node)},
		Funcformat: pg_query.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
	when := pg_query.MakeBoolExprNode(pg_query.BoolExprType_OR_EXPR, []*pg_query.Node{inRange,
		pg_query.MakeBoolExprNode(pg_query.BoolExprType_NOT_EXPR, []*pg_query.Node{finite}, -1)}, -1)
	return &pg_query.Node{Node: &pg_query.Node_CaseExpr{CaseExpr: &pg_query.CaseExpr{
		Args:     []*pg_query.Node{{Node: &pg_query.Node_CaseWhen{CaseWhen: &pg_query.CaseWhen{Expr: when, Result: x, Location: -1}}}},
		Location: -1}}}
}

// everyTypeFields are the extract fields valid for date, timestamp and
// timestamptz alike.
func everyTypeFields() []string {
	return intersect(intersect(extractFields["date"], extractFields["timestamp"]), extractFields["timestamptz"])
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// arith checks +, -, *, / over columns. Every column operand must be a
// number with bounds and is cast to numeric, which cannot overflow within
// the range arithInRange allows; a divisor must be a non-zero constant, and
// keys and conditions may not divide (integer division would change
// meaning under the cast).
func (p *planner) arith(e *pg_query.A_Expr, key bool) (texpr, error) {
	tname := p.table.QualifiedName()
	n := &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: e}}
	op := e.Name[0].GetString_().GetSval()
	switch op {
	case "+", "-", "*", "/":
	default:
		return texpr{}, reject(CodeForbidden, e.Location, "operator %s is not allowed on the values of private table %s", op, tname)
	}
	c := proto.Clone(e).(*pg_query.A_Expr)
	var d deps
	for _, side := range []**pg_query.Node{&c.Lexpr, &c.Rexpr} {
		if *side == nil {
			continue
		}
		t, err := p.expr(*side, key)
		if err != nil {
			return texpr{}, err
		}
		out := t.out
		d |= t.deps
		if t.deps&depColumn != 0 {
			if ref := (*side).GetColumnRef(); ref != nil {
				if _, _, ok := p.argBounds(*side); !ok {
					return texpr{}, reject(CodeForbidden, e.Location, "arithmetic on column %s is refused on private table %s: it needs lower and upper bounds and a number type (overflow would depend on private values)", describe(*side), tname)
				}
				out = p.arithOperand(ref, out)
			} else if (*side).GetAExpr() == nil {
				return texpr{}, reject(CodeForbidden, e.Location, "arithmetic on %s is refused on private table %s: only bounded columns and constants may be combined", describe(*side), tname)
			}
		}
		*side = out
	}
	if d&depColumn != 0 && op == "/" {
		v, ok := numConst(e.Rexpr)
		if key || !ok || v == 0 {
			return texpr{}, reject(CodeForbidden, e.Location, "division is refused in group keys and conditions, and elsewhere allowed only by a non-zero constant, on private table %s", tname)
		}
	}
	if err := p.arithInRange(n); err != nil {
		return texpr{}, err
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, typ: "numeric", deps: d}, nil
}

// columnType is the type of a column reference, from Options.ColumnTypes.
func (p *planner) columnType(ref *pg_query.ColumnRef, c *colRef) (string, error) {
	types := p.a.opts.ColumnTypes
	if types == nil {
		return unknownType, nil
	}
	table, err := p.tableOf(ref, c)
	if err != nil {
		return "", err
	}
	if t, ok := types[table+"."+c.name]; ok {
		return t, nil
	}
	if !p.a.typedTables[table] {
		return "", reject(CodeForbidden, ref.Location, "dpproxy does not know the column types of table %s (it reads them when it starts; restart it after creating or changing a configured table)", table)
	}
	return "", reject(CodeBadColumnRef, ref.Location, "column %s of table %s does not exist (as of when dpproxy started)", c.name, table)
}

// tableOf returns the relation (schema.table) a column reference reads.
func (p *planner) tableOf(ref *pg_query.ColumnRef, c *colRef) (string, error) {
	if c.private {
		return p.table.QualifiedName(), nil
	}
	quals := make([]string, 0, len(ref.Fields))
	for _, f := range ref.Fields[:len(ref.Fields)-1] {
		quals = append(quals, f.GetString_().GetSval())
	}
	byName := map[string]string{}
	var all []string
	for _, r := range p.rels {
		if r.class != relPublic && r.class != relPrivate {
			continue
		}
		q := r.qualified()
		all = append(all, q)
		if r.rv.Alias != nil {
			byName[r.rv.Alias.Aliasname] = q
		} else {
			byName[r.rv.Relname] = q
			byName[q] = q
		}
	}
	if len(quals) > 0 {
		if t, ok := byName[strings.Join(quals, ".")]; ok {
			return t, nil
		}
		return "", reject(CodeBadColumnRef, ref.Location, "column reference %s does not refer to a table of the query", describe(&pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: ref}}))
	}
	var found []string
	seen := map[string]bool{}
	for _, t := range all {
		if _, ok := p.a.opts.ColumnTypes[t+"."+c.name]; ok && !seen[t] {
			seen[t] = true
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", reject(CodeBadColumnRef, ref.Location, "column %s does not exist in the tables of the query (as of when dpproxy started)", c.name)
	}
	return "", reject(CodeAmbiguous, ref.Location, "column reference %q is ambiguous", c.name)
}

// numericColumn reports whether a column may be clamped or computed on as
// a number: its type casts to numeric without failing.
func (p *planner) numericColumn(ref *pg_query.ColumnRef, c *colRef) bool {
	t, err := p.columnType(ref, c)
	return err == nil && (t == unknownType || isNumericFamily(t))
}
