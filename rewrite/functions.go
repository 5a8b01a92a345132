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
func (p *planner) valueFunc(fc *pg_query.FuncCall, key bool) (res texpr, err error) {
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
			guarded := a.guarded && a.shift+truncDays[u] <= maxShiftDays
			if lo, hi := truncBounds(a.typ, u); (lo != "" || hi != "") && !guarded {
				c.Args[1] = truncGuard(a.out, lo, hi)
			}
			if guarded {
				defer func() { res.guarded, res.shift = true, a.shift+truncDays[u] }()
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
	case "floor", "ceil", "ceiling", "round", "trunc":
		// Of one number: total for every number type (numeric and float
		// ±Infinity and NaN round to themselves, and the result of a
		// numeric has no more digits than its argument). The forms with a
		// scale (round(x, n)) are not: a large n makes the result's scale
		// grow. floor(extract(epoch FROM t) / N) * N is Grafana's
		// $__timeGroup, floor((x - a) / w) * w Metabase's binning.
		if len(c.Args) != 1 {
			break
		}
		a, err := p.expr(c.Args[0], key)
		if err != nil {
			return texpr{}, err
		}
		if a.typ != unknownType && !isNumericFamily(a.typ) {
			return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "%s of %s (%s) is refused on private table %s: only numbers", name, describe(c.Args[0]), shownType(a.typ), tname)
		}
		c.Args[0] = a.out
		typ, sem := a.typ, semType(a)
		if scalarTypes[typ] == famInt {
			typ = "float8" // PostgreSQL resolves floor(integer) as floor(double precision)
		}
		if scalarTypes[sem] == famInt && typ == "numeric" {
			// Integer arithmetic printed in numeric (arith): PostgreSQL
			// would compute floor(double precision), whose text differs
			// for large values (1e+15); the value is within ±1e100
			// (arithInRange), so the cast to float8 cannot fail.
			node = &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{Arg: node,
				TypeName: &pg_query.TypeName{Names: []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("float8")}, Typemod: -1, Location: -1}, Location: -1}}}
			typ = "float8"
		}
		if scalarTypes[sem] == famInt {
			sem = "float8"
		}
		return texpr{out: node, typ: typ, sem: sem, deps: a.deps}, nil
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
	return texpr{}, reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed on the values of private table %s: only functions that cannot fail for any value are (lower, upper, date_trunc, extract, date_part, width_bucket, floor, ceil, round, trunc), or functions of constants alone", name, tname)
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

// extractRange is the range of the finite values of extract(field FROM x)
// for x of any date or time type, and whether the field is monotonic: an
// infinite x gives ±Infinity for those, NULL for the others (PostgreSQL
// 14 and later).
func extractRange(field string) (lo, hi float64, monotonic, ok bool) {
	switch field {
	case "microseconds":
		return 0, 61e6, false, true
	case "milliseconds":
		return 0, 61e3, false, true
	case "second":
		return 0, 61, false, true
	case "minute":
		return 0, 59, false, true
	case "hour":
		return 0, 23, false, true
	case "day":
		return 1, 31, false, true
	case "week":
		return 1, 53, false, true
	case "month":
		return 1, 12, false, true
	case "quarter":
		return 1, 4, false, true
	case "dow":
		return 0, 6, false, true
	case "isodow":
		return 1, 7, false, true
	case "doy":
		return 1, 366, false, true
	case "timezone":
		return -604800, 604800, false, true // ±167 hours
	case "timezone_hour":
		return -167, 167, false, true
	case "timezone_minute":
		return -59, 59, false, true
	case "year", "isoyear":
		return -4714, 5874898, true, true // date's range: 4714 BC to 5874897 AD
	case "decade":
		return -472, 587490, true, true
	case "century":
		return -48, 58749, true, true
	case "millennium":
		return -5, 5875, true, true
	case "julian":
		return 0, 2147483494, true, true
	case "epoch":
		return -2.2e11, 1.86e14, true, true
	}
	return 0, 0, false, false
}

// extractField returns the field of extract(field FROM x) or
// date_part('field', x), lower case.
func extractField(n *pg_query.Node) (string, bool) {
	fc := n.GetFuncCall()
	if fc == nil || len(fc.Args) != 2 {
		return "", false
	}
	if _, name := funcName(fc); name != "extract" && name != "date_part" {
		return "", false
	}
	u, ok := strConst(fc.Args[0])
	return strings.ToLower(u), ok
}

// finiteGuard is CASE WHEN isfinite(x) THEN x END.
func finiteGuard(x *pg_query.Node) *pg_query.Node {
	finite := &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
		Funcname:   []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("isfinite")},
		Args:       []*pg_query.Node{proto.Clone(x).(*pg_query.Node)},
		Funcformat: pg_query.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
	return &pg_query.Node{Node: &pg_query.Node_CaseExpr{CaseExpr: &pg_query.CaseExpr{
		Args:     []*pg_query.Node{{Node: &pg_query.Node_CaseWhen{CaseWhen: &pg_query.CaseWhen{Expr: finite, Result: x, Location: -1}}}},
		Location: -1}}}
}

// intRange is the range of each integer type.
var intRange = map[string][2]float64{"int2": {-32768, 32767}, "int4": {-2147483648, 2147483647}, "int8": {-9.2e18, 9.2e18}}

// extractCast checks CAST(extract(field FROM x) AS integer) (Metabase's
// month-of-year, day-of-week...; date_part alike): numeric or float to
// an integer type fails on ±Infinity, NaN and values beyond the type, so
// it is total when every finite value of the field fits the type (with
// rounding) and an infinite x gives NULL, not ±Infinity. For the
// monotonic fields (year, epoch, ...) the rewrite passes extract NULL
// instead of an infinite x: a value PostgreSQL would have failed on
// becomes a NULL key. Returns the argument to print, or false.
func extractCast(arg texpr, src *pg_query.Node, to string) (*pg_query.Node, bool) {
	field, ok := extractField(src)
	r, isInt := intRange[to]
	if !ok || !isInt {
		return nil, false
	}
	lo, hi, monotonic, ok := extractRange(field)
	if !ok || lo-1 < r[0] || hi+1 > r[1] {
		return nil, false
	}
	fc := arg.out.GetFuncCall()
	if fc == nil || len(fc.Args) != 2 {
		return nil, false
	}
	if monotonic {
		c := proto.Clone(fc).(*pg_query.FuncCall)
		c.Args[1] = finiteGuard(c.Args[1])
		return &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: c}}, true
	}
	return arg.out, true
}

// truncDays is how far back date_trunc may move a value, in days, by unit
// (a guarded value stays guarded: arith.go, datetimeInterval).
var truncDays = map[string]float64{"microseconds": 1, "milliseconds": 1, "second": 1, "minute": 1, "hour": 1, "day": 1, "week": 7,
	"month": 31, "quarter": 92, "year": 366, "decade": 3660, "century": 36600, "millennium": 366000}
