package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The checker of a private query's expressions: every WHERE, FILTER and
// join condition, every CASE, group key and aggregate argument is checked
// here against the totality table (totality.go), its constants hoisted
// (hoist.go), and returned as it is to be printed in the rewrite.

// deps says what an expression depends on besides constants.
type deps uint8

const (
	depColumn deps = 1 << iota // a column of the private table
	depParam                   // a client parameter ($n)
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
	// sem is the type PostgreSQL would compute the value in when it
	// differs from typ, the type the rewrite prints it as (arithmetic on
	// integer columns is printed in numeric): it decides what a division
	// means.
	sem string
	// guarded is set for a date or time computed from a column passed
	// NULL outside [guardLower, guardUpper] (datetimeInterval); shift is
	// how many days the computations since may have moved it.
	guarded bool
	shift   float64
}

// semType is the type PostgreSQL would compute t in.
func semType(t texpr) string {
	if t.sem != "" {
		return t.sem
	}
	return t.typ
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
			return texpr{}, reject(pgerr.InsufficientPrivilege, x.TypeCast.Location, "a cast of a column to type %s is refused on private table %s: it can fail depending on private values", typeNameString(x.TypeCast.TypeName), tname)
		}
		if out, ok := extractCast(arg, x.TypeCast.Arg, to); ok && len(x.TypeCast.TypeName.Typmods) == 0 {
			c := proto.Clone(x.TypeCast).(*pg_query.TypeCast)
			c.Arg = out
			return texpr{out: &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: c}}, typ: to, deps: arg.deps}, nil
		}
		if !castOK(arg.typ, to) {
			return texpr{}, reject(pgerr.InsufficientPrivilege, x.TypeCast.Location, "a cast of %s (%s) to %s is refused on private table %s: it can fail depending on private values (casts that cannot: to text, widening numbers, timestamps to date)", describe(x.TypeCast.Arg), shownType(arg.typ), to, tname)
		}
		c := proto.Clone(x.TypeCast).(*pg_query.TypeCast)
		c.Arg = arg.out
		out := texpr{out: &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: c}}, typ: to, deps: arg.deps}
		if arg.guarded && isDatetime(scalarTypes[to]) {
			out.guarded, out.shift = true, arg.shift+1 // to date: at most a day earlier
		}
		return out, nil
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
		return texpr{}, reject(pgerr.FeatureNotSupported, x.SubLink.Location, "subqueries are not supported in queries over private table %s", tname)
	}
	return texpr{}, reject(pgerr.FeatureNotSupported, -1, "%s is not supported in a query over private table %s; use CASE WHEN ... THEN ... END for conditions", describe(n), tname)
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
			return texpr{}, reject(pgerr.FeatureNotSupported, c.Location, "malformed CASE")
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
		return "", nil, reject(pgerr.InsufficientPrivilege, loc, "%s have types %s on private table %s: PostgreSQL would convert some to a common type in a way that can fail on some values", what, strings.Join(shown, ", "), p.table.QualifiedName())
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
