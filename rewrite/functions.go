package rewrite

import (
	"math"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The functions a private query may apply to column values (the
// totality table's functions), checked by the types of their arguments.

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
		return texpr{}, reject(pgerr.FeatureNotSupported, fc.Location, "aggregate %s is not allowed inside a group key, a condition or another aggregate", name)
	}
	if schema != "" && schema != "pg_catalog" || fc.AggDistinct || fc.FuncVariadic || len(fc.AggOrder) > 0 {
		return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed on private table %s", name, tname)
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
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "%s of %s (%s) is refused on private table %s: only strings", name, describe(c.Args[0]), shownType(a.typ), tname)
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
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "%s of %s (%s) is refused on private table %s%s", name, describe(c.Args[1]), shownType(a.typ), tname, hint)
		}
		if !ok || !contains(units, u) {
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "%s of %s on private table %s needs a constant unit valid for type %s (%s): PostgreSQL checks the unit only when a row reaches it",
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
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "width_bucket on private table %s needs a column with bounds and constant, distinct bounds and a positive bucket count", tname)
		}
		if _, _, ok := p.argBounds(c.Args[0]); !ok {
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "width_bucket on private table %s needs a column with lower and upper bounds", tname)
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
	return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed on the values of private table %s: only functions that cannot fail for any value are (lower, upper, date_trunc, extract, date_part, width_bucket), or functions of constants alone", name, tname)
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
