package rewrite

import (
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
)

// Phase bounds: the interval an expression's values lie in, from the
// configured bounds of its columns and its constants, and the clamp that
// keeps an aggregate's argument in it.

// numConst returns the value of a numeric constant (possibly cast).
func numConst(n *pg_query.Node) (float64, bool) {
	var cast *pg_query.TypeName
	if tc := n.GetTypeCast(); tc != nil {
		n, cast = tc.Arg, tc.TypeName
	}
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return 0, false
	}
	var v float64
	switch x := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		v = float64(x.Ival.Ival)
	case *pg_query.A_Const_Fval:
		f, err := strconv.ParseFloat(x.Fval.Fval, 64)
		if err != nil || math.IsInf(f, 0) {
			return 0, false
		}
		v = f
	default:
		return 0, false
	}
	if cast != nil && !castKeepsValue(cast, v) {
		return 0, false
	}
	return v, true
}

// castKeepsValue reports whether casting the number literal v to t leaves
// its value as numConst read it. Only then may a cast constant stand for
// its literal: 0.4::int4 is 0 and 0.04::numeric(2,1) is 0.0, so a divisor
// or a bound read through such a cast would be another number than the
// one PostgreSQL computes (red team, issue 14: a division by 0.4::int4
// failed on exactly the rows present). Anything else is not a constant
// here, and what needs one refuses it.
func castKeepsValue(t *pg_query.TypeName, v float64) bool {
	if len(t.GetTypmods()) > 0 || len(t.GetArrayBounds()) > 0 || len(t.GetNames()) == 0 {
		return false
	}
	switch t.Names[len(t.Names)-1].GetString_().GetSval() {
	case "numeric", "float8":
		return true
	case "int2":
		return v == math.Trunc(v) && math.Abs(v) <= math.MaxInt16
	case "int4":
		return v == math.Trunc(v) && math.Abs(v) <= math.MaxInt32
	case "int8":
		return v == math.Trunc(v) && math.Abs(v) < 1<<53
	}
	return false
}

// argBounds derives clamping bounds for an aggregate's argument: a
// column's configured bounds, constants, and CASE/COALESCE/arithmetic with
// constants over them. Only the clamp in the rewritten SQL matters for the
// sensitivity; these bounds just make it fit the expression.
func (p *planner) argBounds(n *pg_query.Node) (lo, hi float64, ok bool) {
	lo, hi, empty, ok := p.bounds1(n)
	if empty {
		return 0, 0, false
	}
	return lo, hi, ok && !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && !math.IsNaN(lo) && !math.IsNaN(hi)
}

// bounds1 returns the range of n; empty means n is always NULL.
func (p *planner) bounds1(n *pg_query.Node) (lo, hi float64, empty, ok bool) {
	hull := func(ns []*pg_query.Node) (float64, float64, bool, bool) {
		lo, hi, empty := math.Inf(1), math.Inf(-1), true
		for _, x := range ns {
			l, h, e, ok := p.bounds1(x)
			if !ok {
				return 0, 0, false, false
			}
			if e {
				continue
			}
			lo, hi, empty = math.Min(lo, l), math.Max(hi, h), false
		}
		return lo, hi, empty, true
	}
	switch x := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		c, err := p.column(x.ColumnRef)
		if err != nil || !c.private {
			return 0, 0, false, false
		}
		col := p.table.Columns[c.name]
		if col == nil || !col.HasBounds() || c.name == p.table.PrivacyUnit || !p.numericColumn(x.ColumnRef, c) {
			return 0, 0, false, false
		}
		return *col.Lower, *col.Upper, false, true
	case *pg_query.Node_AConst:
		if x.AConst.Isnull {
			return 0, 0, true, true
		}
		v, ok := numConst(n)
		return v, v, false, ok
	case *pg_query.Node_TypeCast:
		return p.bounds1(x.TypeCast.Arg)
	case *pg_query.Node_CaseExpr:
		var rs []*pg_query.Node
		for _, w := range x.CaseExpr.Args {
			rs = append(rs, w.GetCaseWhen().Result)
		}
		if x.CaseExpr.Defresult != nil {
			rs = append(rs, x.CaseExpr.Defresult)
		}
		return hull(rs)
	case *pg_query.Node_CoalesceExpr:
		return hull(x.CoalesceExpr.Args)
	case *pg_query.Node_FuncCall:
		fc := x.FuncCall
		_, name := funcName(fc)
		switch name {
		case "extract":
			// Finite values only: an infinite date gives ±Infinity,
			// which numeric arithmetic carries without failing.
			if field, ok := extractField(n); ok {
				lo, hi, _, ok := extractRange(field)
				return lo, hi, false, ok
			}
		case "floor", "ceil", "ceiling", "round", "trunc":
			if len(fc.Args) == 1 {
				lo, hi, em, ok := p.bounds1(fc.Args[0])
				return math.Floor(lo), math.Ceil(hi), em, ok
			}
		}
	case *pg_query.Node_AExpr:
		e := x.AExpr
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
			return 0, 0, false, false
		}
		op := e.Name[0].GetString_().GetSval()
		if e.Lexpr == nil {
			l, h, em, ok := p.bounds1(e.Rexpr)
			if op == "-" {
				return -h, -l, em, ok
			}
			return l, h, em, ok && op == "+"
		}
		a, b, ea, oka := p.bounds1(e.Lexpr)
		c, d, eb, okb := p.bounds1(e.Rexpr)
		if !oka || !okb {
			return 0, 0, false, false
		}
		if ea || eb {
			return 0, 0, true, true
		}
		switch op {
		case "+":
			return a + c, b + d, false, true
		case "-":
			return a - d, b - c, false, true
		case "*":
			ps := []float64{a * c, a * d, b * c, b * d}
			return slicesMin(ps), slicesMax(ps), false, true
		case "/":
			if c != d || c == 0 {
				return 0, 0, false, false
			}
			return math.Min(a/c, b/c), math.Max(a/c, b/c), false, true
		}
	}
	return 0, 0, false, false
}

func slicesMin(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Min(m, x)
	}
	return m
}

func slicesMax(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Max(m, x)
	}
	return m
}

// clampCast is the cast applied to an aggregate argument before clamping:
// none for a plain integer column of the private table (clamping and
// summing integers is exact and much cheaper than numeric arithmetic per
// row), ::numeric for everything else, so that sums never run in floating
// point.
func (p *planner) clampCast(arg *pg_query.Node) string {
	if ref := arg.GetColumnRef(); ref != nil {
		if c, err := p.column(ref); err == nil && c.private && p.a.opts.IntegerColumns[p.table.QualifiedName()+"."+c.name] {
			return ""
		}
	}
	return "::numeric"
}

// clampNode is least(greatest((n)::numeric, lo), hi), NULL when n is
// NULL (nullclamp.go).
func clampNode(n *pg_query.Node, lo, hi float64) *pg_query.Node {
	lit := func(v float64) *pg_query.Node {
		// A negative bound is a negative constant, as PostgreSQL's parser
		// reads "-1.5" (not unary minus applied to 1.5), so that the
		// printed clamp parses back to the same tree (sqltext.go).
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			if i, err := strconv.ParseInt(s, 10, 32); err == nil {
				return pg_query.MakeAConstIntNode(i, -1)
			}
		}
		return &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Val: &pg_query.A_Const_Fval{Fval: &pg_query.Float{Fval: s}}, Location: -1}}}
	}
	g := &pg_query.Node{Node: &pg_query.Node_MinMaxExpr{MinMaxExpr: &pg_query.MinMaxExpr{Op: pg_query.MinMaxOp_IS_GREATEST, Args: []*pg_query.Node{numericCast(n), lit(lo)}, Location: -1}}}
	return nullSafeNode(proto.Clone(n).(*pg_query.Node), &pg_query.Node{Node: &pg_query.Node_MinMaxExpr{MinMaxExpr: &pg_query.MinMaxExpr{Op: pg_query.MinMaxOp_IS_LEAST, Args: []*pg_query.Node{g, lit(hi)}, Location: -1}}})
}

func numericCast(n *pg_query.Node) *pg_query.Node {
	return &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{Arg: n, TypeName: &pg_query.TypeName{
		Names: []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("numeric")}, Typemod: -1, Location: -1}, Location: -1}}}
}
