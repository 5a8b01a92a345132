package rewrite

import (
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Arithmetic over private columns (a check of the expressions phase):
// computed in numeric, and refused when its range or scale could exceed
// what numeric holds.

// Limits of arithmetic over private columns. PostgreSQL's numeric is not
// total: a result beyond about 1e131072, or with more than 16383 digits
// after the point, raises an error, and only for the rows the expression
// is evaluated on (an untaken CASE branch is not), so an overflow would
// tell whether some row exists. The range of every such expression is
// derived from its columns' bounds and constants (bounds1) and must stay
// within ±maxArithValue; its constants may have at most maxArithScale
// digits after the point, at most maxArithConsts of them, and non-integer
// columns are rounded to maxArithScale digits first, so that the result's
// scale stays far below PostgreSQL's limit whatever the rows hold. The
// configured bounds do not bound what the rows hold, so a column whose
// type does not bound it either is clamped to them before the arithmetic
// and the digits of the whole expression are checked too (maxArithDigits
// below).
const (
	maxArithValue  = 1e100
	maxArithScale  = 30
	maxArithConsts = 16
)

// arithInRange refuses an arithmetic expression over private columns
// whose result could leave numeric's range or scale (see the limits).
func (p *planner) arithInRange(n *pg_query.Node) error {
	tname := p.table.QualifiedName()
	lo, hi, empty, ok := p.bounds1(n)
	if !ok {
		return reject(pgerr.InsufficientPrivilege, exprLocation(n), "arithmetic %s is refused on private table %s: only bounded columns and constants may be combined (a parameter's value is not known when the query is checked)", describe(n), tname)
	}
	if !empty && !(math.Abs(lo) <= maxArithValue && math.Abs(hi) <= maxArithValue) {
		return reject(pgerr.InsufficientPrivilege, exprLocation(n), "arithmetic %s is refused on private table %s: its value could exceed ±1e100 (an overflow would depend on private values)", describe(n), tname)
	}
	p.mentionMemo = map[*pg_query.Node]bool{}
	d, ok := p.arithDigits(n, true)
	p.mentionMemo = nil
	if !ok || d > maxArithDigits {
		return reject(pgerr.InsufficientPrivilege, exprLocation(n), "arithmetic %s is refused on private table %s: for values its columns' types allow (beyond their configured bounds) it could exceed numeric's range, and an overflow would depend on private values", describe(n), tname)
	}
	consts := 0
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		c, isConst := m.Interface().(*pg_query.A_Const)
		if !isConst || err != nil {
			return err == nil
		}
		if consts++; consts > maxArithConsts {
			err = reject(pgerr.InsufficientPrivilege, c.Location, "arithmetic %s is refused on private table %s: at most %d constants may be combined with columns", describe(n), tname, maxArithConsts)
			return false
		}
		if f := c.GetFval(); f != nil && decimalScale(f.Fval) > maxArithScale {
			err = reject(pgerr.InsufficientPrivilege, c.Location, "constant %s is refused in arithmetic on private table %s: at most %d digits after the point", f.Fval, tname, maxArithScale)
		}
		return err == nil
	})
	return err
}

// decimalScale is the number of digits after the point of a numeric
// literal as PostgreSQL reads it ("1.25" 2, "1e-5" 5, "1.5e3" 0).
func decimalScale(lit string) int {
	mant, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	scale := 0
	if _, frac, ok := strings.Cut(mant, "."); ok {
		scale = len(frac)
	}
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil {
			return math.MaxInt32
		}
		scale -= e
	}
	return max(scale, 0)
}

// exprLocation is the location of an expression node, or -1.
func exprLocation(n *pg_query.Node) int32 {
	if e := n.GetAExpr(); e != nil {
		return e.Location
	}
	return -1
}

// arithOperand prints a private column as an operand of arithmetic: as
// numeric, and rounded to maxArithScale digits unless it is an integer,
// so that the scale of the result cannot depend on the rows.
func (p *planner) arithOperand(ref *pg_query.ColumnRef, out *pg_query.Node) *pg_query.Node {
	if c, err := p.column(ref); err == nil && p.a.opts.IntegerColumns[p.table.QualifiedName()+"."+c.name] {
		return numericCast(out)
	} else if err == nil {
		// A numeric(p,s) column has at most s digits after the point: no
		// rounding needed, and none that would change the value's text
		// (round(x, 30) pads to 30 digits), which matters in group keys.
		if tm, ok := p.a.opts.NumericTypmods[p.table.QualifiedName()+"."+c.name]; ok && tm[1] <= maxArithScale {
			return numericCast(out)
		}
	}
	return &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
		Funcname:   []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("round")},
		Args:       []*pg_query.Node{numericCast(out), pg_query.MakeAConstIntNode(maxArithScale, -1)},
		Funcformat: pg_query.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
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
		return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "operator %s is not allowed on the values of private table %s", op, tname)
	}
	if t, ok, err := p.datetimeInterval(e, key); ok {
		return t, err
	}
	c := proto.Clone(e).(*pg_query.A_Expr)
	var d deps
	var sems []string
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
		sems = append(sems, semType(t))
		if t.deps&depColumn != 0 {
			if ref := (*side).GetColumnRef(); ref != nil {
				if _, _, ok := p.argBounds(*side); !ok {
					return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic on column %s is refused on private table %s: it needs lower and upper bounds and a number type (overflow would depend on private values)", describe(*side), tname)
				}
				out = p.arithOperand(ref, out)
			} else if (*side).GetAExpr() == nil && !p.boundedNumeric(*side, t) {
				return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic on %s is refused on private table %s: only bounded columns, extract(...) of a date or time (numeric) and constants may be combined", describe(*side), tname)
			}
			// A column whose type does not bound its values is clamped to
			// its configured bounds first (see maxArithDigits).
			if p.arithClamp(*side) {
				lo, hi, ok := p.argBounds(*side)
				if !ok {
					return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic on %s is refused on private table %s: it needs lower and upper bounds (overflow would depend on private values)", describe(*side), tname)
				}
				out = clampNode(out, lo, hi)
			}
		}
		*side = out
	}
	sem := arithSem(sems)
	if d&depColumn != 0 && op == "/" {
		v, ok := numConst(e.Rexpr)
		if !ok || v == 0 {
			return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "division on private table %s is allowed only by a non-zero constant: a division by zero would depend on private values", tname)
		}
		switch scalarTypes[sem] {
		case famInt:
			// PostgreSQL's integer division truncates toward zero; in
			// numeric that is div(), exact and total for a non-zero
			// divisor (the operands are printed as numeric).
			div := &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
				Funcname:   []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("div")},
				Args:       []*pg_query.Node{c.Lexpr, numericCast(c.Rexpr)},
				Funcformat: pg_query.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
			if err := p.arithInRange(n); err != nil {
				return texpr{}, err
			}
			return texpr{out: div, typ: "numeric", sem: sem, deps: d}, nil
		case famNumeric:
			// numeric divided by a constant: the same division printed.
		default:
			if key {
				return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "division of a %s value is refused in group keys and conditions on private table %s: it is computed in numeric to be total, which would change the value (cast the column to numeric first)", shownType(sem), tname)
			}
		}
	}
	if err := p.arithInRange(n); err != nil {
		return texpr{}, err
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, typ: "numeric", sem: sem, deps: d}, nil
}

// arithSem is the type PostgreSQL computes arithmetic on operands of the
// given types in: integers in the widest integer type, numeric with any
// numeric, float8 with any float ("" and unknown types count as nothing
// known: numeric).
func arithSem(types []string) string {
	out := ""
	for _, t := range types {
		switch scalarTypes[t] {
		case famFloat:
			return "float8"
		case famInt:
			if out == "" || scalarTypes[out] == famInt && intWidth[t] > intWidth[out] {
				out = t
			}
		case famNumeric:
			out = "numeric"
		default:
			if t == "" {
				continue // an untyped literal takes the other side's type
			}
			return "numeric"
		}
	}
	if out == "" {
		return "numeric"
	}
	return out
}

// boundedNumeric reports whether a function operand of arithmetic is a
// numeric value with a known range: extract(...) of a date or time
// (numeric, ±Infinity for an infinite value, which numeric arithmetic
// carries without failing) or floor/ceil/round/trunc of such a value.
func (p *planner) boundedNumeric(n *pg_query.Node, t texpr) bool {
	fc := n.GetFuncCall()
	if fc == nil {
		return false
	}
	// floor(...) of integer arithmetic is float8 (as in PostgreSQL): an
	// integer-valued float within ±1e100, which + - * / by constants of
	// at most 30 decimals can neither overflow nor underflow.
	if _, name := funcName(fc); t.typ == "float8" && (name == "floor" || name == "ceil" || name == "ceiling" || name == "round" || name == "trunc") &&
		fc.Args[0].GetAExpr() != nil {
		_, _, _, ok := p.bounds1(n)
		return ok
	}
	if t.typ != "numeric" && t.typ != unknownType {
		return false
	}
	_, _, _, ok := p.bounds1(n)
	return ok
}

// Date and time plus or minus a constant interval (Metabase's week:
// date_trunc('week', CAST(d + interval '1 day' AS date)) + interval '-1
// day'). Adding an interval fails when the result leaves the timestamp
// range (4713 BC to 294276 AD), and a date is converted to timestamp
// first, which fails beyond 294276 AD. So the interval must be a literal
// (read here), and the rewrite passes the column NULL instead of a value
// outside [guardLower, guardUpper] (values no real data holds): it
// becomes a NULL key instead of an error. From there the value is
// tracked (texpr.guarded, shift): each interval added, date_trunc and
// cast to date moves it by at most its length in days, and the total may
// not exceed maxShiftDays, so every later step stays more than the
// largest time zone offset inside the range, and date_trunc of it needs
// no guard of its own (2000 BC - 2000 years is after every truncLower
// bound). ±infinity plus an interval is ±infinity, without failing.
const (
	maxShiftDays = 366 * 2000
	guardLower   = "2000-01-01 BC"
	guardUpper   = "292000-01-01"
)

// datetimeInterval checks x ± interval 'literal' (and interval + x) for x
// a date, timestamp or timestamptz; ok is false when e is not that.
func (p *planner) datetimeInterval(e *pg_query.A_Expr, key bool) (texpr, bool, error) {
	op := e.Name[0].GetString_().GetSval()
	if e.Lexpr == nil || e.Rexpr == nil || op != "+" && op != "-" {
		return texpr{}, false, nil
	}
	// Decided on the syntax first, so that each side is checked once
	// (checking both ways would be exponential in the nesting).
	dtSide, ivNode := &e.Lexpr, e.Rexpr
	switch {
	case intervalLiteral(e.Rexpr):
	case intervalLiteral(e.Lexpr) && op == "+":
		dtSide, ivNode = &e.Rexpr, e.Lexpr
	default:
		return texpr{}, false, nil
	}
	tname := p.table.QualifiedName()
	dt, err := p.expr(*dtSide, key)
	if err != nil {
		return texpr{}, true, err
	}
	iv, err := p.expr(ivNode, key)
	if err != nil {
		return texpr{}, true, err
	}
	if !isDatetime(scalarTypes[dt.typ]) || dt.deps&depColumn == 0 {
		return texpr{}, true, reject(pgerr.InsufficientPrivilege, e.Location, "adding an interval to %s (%s) is refused on private table %s: only a date, timestamp or timestamptz column plus or minus an interval literal", describe(*dtSide), shownType(dt.typ), tname)
	}
	lit, isLit := strConst(ivNode)
	days, ok := intervalDays(lit)
	shift := dt.shift + days
	if !iv.lit || !isLit || !ok || shift > maxShiftDays {
		return texpr{}, true, reject(pgerr.InsufficientPrivilege, e.Location, "adding an interval to %s is refused on private table %s unless the interval is a literal such as interval '1 day' and all the intervals and truncations applied add up to at most 2000 years: a result out of range would fail depending on private values", describe(*dtSide), tname)
	}
	c := proto.Clone(e).(*pg_query.A_Expr)
	guarded := dt.out
	if !dt.guarded {
		guarded = truncGuard(dt.out, guardLower, guardUpper)
	}
	if dtSide == &e.Lexpr {
		c.Lexpr, c.Rexpr = guarded, iv.out
	} else {
		c.Lexpr, c.Rexpr = iv.out, guarded
	}
	typ := "timestamp"
	if dt.typ == "timestamptz" {
		typ = "timestamptz"
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, typ: typ, deps: dt.deps | iv.deps, guarded: true, shift: shift}, true, nil
}

// intervalUnitDays are the days of each unit an interval literal may
// use, rounded up (a month is at most 31 days, a year 366).
var intervalUnitDays = map[string]float64{
	"microsecond": 1e-6 / 86400, "millisecond": 1e-3 / 86400, "second": 1.0 / 86400, "sec": 1.0 / 86400,
	"minute": 1.0 / 1440, "min": 1.0 / 1440, "hour": 1.0 / 24, "hr": 1.0 / 24, "day": 1, "week": 7,
	"month": 31, "mon": 31, "year": 366, "yr": 366, "decade": 3660, "century": 36600, "centurie": 36600,
	"millennium": 366000, "millennia": 366000,
}

// intervalDays reads an interval literal of the form '[@] N unit [N unit
// ...]' ('1 day', '-1 day', '30 days', '2 hours 30 minutes') and returns
// the largest number of days it can span; false for any other form.
func intervalDays(s string) (float64, bool) {
	f := strings.Fields(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "@"))
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, false
	}
	total := 0.0
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, false
		}
		u := strings.TrimSuffix(f[i+1], "s")
		d, ok := intervalUnitDays[u]
		if !ok {
			return 0, false
		}
		total += math.Abs(n) * d
	}
	return total, true
}

// intervalLiteral reports whether n is a cast to interval (interval
// 'literal', 'literal'::interval, $1::interval): the operand of a date or
// time plus an interval, checked by datetimeInterval.
func intervalLiteral(n *pg_query.Node) bool {
	tc := n.GetTypeCast()
	if tc == nil {
		return false
	}
	t, ok := castType(tc.TypeName)
	return ok && t == "interval"
}

// Magnitudes of arithmetic over private columns (issue 14). The checks
// above use the configured bounds, which the rows need not respect: an
// unconstrained numeric column holds values up to 10^131072 and a float
// cast to numeric up to 1.8e308, so a product of them overflows numeric
// (22003) only for the rows holding such values, and one person's row
// could make sum(v * v) or a key floor(v * v) fail after the charge. So
// every column operand of arithmetic in an aggregate argument or a group
// key has a magnitude known before the query runs:
//
//   - bounded by its type: int2, int4, int8 (2^15, 2^31, 2^63) and
//     numeric(p,s) (10^(p−s));
//   - otherwise (unconstrained numeric, float4, float8, unknown types) it
//     is clamped to its configured bounds before the arithmetic, NULL
//     kept NULL (clampNode), which does not change a value within them;
//     a floor/ceil/round/trunc of such a column likewise.
//
// With those magnitudes the number of digits before the point of the
// whole expression is bounded (arithDigits: a product adds its factors'
// digits, a sum adds at most one) and must stay within maxArithDigits,
// far below numeric's 131072. Conditions cannot clamp (they are printed
// as written) and refuse the unbounded types instead (condarith.go);
// both read a column's type bound from typeDigits.
const maxArithDigits = 100000

// typeDigits is log10 of the largest magnitude a private column's type
// allows (int2/int4/int8, numeric(p,s)); ok is false for a type that
// does not bound its values.
func (p *planner) typeDigits(ref *pg_query.ColumnRef) (float64, bool) {
	c, err := p.column(ref)
	if err != nil {
		return 0, false
	}
	key := p.table.QualifiedName() + "." + c.name
	if t, err := p.columnType(ref, c); err == nil {
		switch t {
		case "int2":
			return 15 * math.Log10(2), true
		case "int4":
			return 31 * math.Log10(2), true
		case "int8":
			return 63 * math.Log10(2), true
		}
	}
	if p.a.opts.IntegerColumns[key] {
		return 63 * math.Log10(2), true
	}
	if tm, ok := p.declaredNumeric(c); ok {
		return float64(tm[0] - tm[1]), true
	}
	return 0, false
}

// declaredNumeric is the declared precision and scale of a private
// numeric(p,s) column, whose type bounds it by 10^(p−s): the rule
// conditions (condarith.go) and arithmetic in aggregate arguments and
// keys (typeDigits) share.
func (p *planner) declaredNumeric(c *colRef) ([2]int, bool) {
	tm, ok := p.a.opts.NumericTypmods[p.table.QualifiedName()+"."+c.name]
	return tm, ok && c.private
}

// boundsDigits is log10 of the larger magnitude of [lo, hi], at least 0.
func boundsDigits(lo, hi float64) float64 {
	m := math.Max(math.Abs(lo), math.Abs(hi))
	if m <= 1 {
		return 0
	}
	return math.Log10(m)
}

// arithDigits bounds log10 of the magnitude of n as arith prints it:
// operand says n is an operand of arithmetic, where a column or a
// rounding function of unbounded type is clamped to its configured bounds
// (arithClamp); elsewhere only its type bounds it. ok is false when
// nothing bounds it.
func (p *planner) arithDigits(n *pg_query.Node, operand bool) (float64, bool) {
	if n == nil {
		return 0, true
	}
	if !p.mentionsColumnMemo(n) {
		lo, hi, _, ok := p.bounds1(n)
		return boundsDigits(lo, hi), ok
	}
	switch x := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		if d, ok := p.typeDigits(x.ColumnRef); ok {
			return d, true
		}
		if operand {
			lo, hi, ok := p.argBounds(n)
			return boundsDigits(lo, hi), ok
		}
	case *pg_query.Node_FuncCall:
		fc := x.FuncCall
		_, name := funcName(fc)
		switch name {
		case "extract":
			lo, hi, _, ok := p.bounds1(n)
			return boundsDigits(lo, hi), ok
		case "floor", "ceil", "ceiling", "round", "trunc":
			if len(fc.Args) == 1 {
				if d, ok := p.arithDigits(fc.Args[0], false); ok {
					return d + 1, true
				}
				if operand {
					lo, hi, ok := p.argBounds(n)
					return boundsDigits(lo, hi), ok
				}
			}
		}
	case *pg_query.Node_AExpr:
		e := x.AExpr
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
			return 0, false
		}
		a, oka := p.arithDigits(e.Lexpr, true)
		b, okb := p.arithDigits(e.Rexpr, true)
		if !oka || !okb {
			return 0, false
		}
		switch e.Name[0].GetString_().GetSval() {
		case "+", "-":
			if e.Lexpr == nil {
				return b, true
			}
			hi, lo := math.Max(a, b), math.Min(a, b)
			return hi + math.Log10(1+math.Pow(10, lo-hi)), true
		case "*":
			return a + b, true
		case "/":
			v, ok := numConst(e.Rexpr)
			if !ok || v == 0 {
				return 0, false
			}
			return a + math.Max(0, -math.Log10(math.Abs(v))), true
		}
	}
	return 0, false
}

// arithClamp reports whether an operand of arithmetic is clamped to its
// configured bounds before the arithmetic: a column, or a rounding
// function of one, whose type does not bound it (see arithDigits).
func (p *planner) arithClamp(n *pg_query.Node) bool {
	if n.GetColumnRef() == nil && n.GetFuncCall() == nil {
		return false
	}
	p.mentionMemo = map[*pg_query.Node]bool{}
	_, ok := p.arithDigits(n, false)
	p.mentionMemo = nil
	return !ok
}

// mentionsColumnMemo is mentionsColumn remembered per node for one
// arithDigits call (p.mentionMemo, nil outside one): arithDigits asks it
// at every level of an expression, and a fresh walk each time made the
// analysis of a deep expression quadratic (the guard's deepest shapes
// took 16 s instead of 1 s). Nothing changes the tree during the call.
func (p *planner) mentionsColumnMemo(n *pg_query.Node) bool {
	if p.mentionMemo == nil {
		return p.mentionsColumn(n)
	}
	if v, ok := p.mentionMemo[n]; ok {
		return v
	}
	found := n.GetColumnRef() != nil
	if !found {
		walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
			if found {
				return false
			}
			switch x := m.Interface().(type) {
			case *pg_query.Node:
				if x != n {
					found = p.mentionsColumnMemo(x)
					return false // decided, and remembered, by the call
				}
			case *pg_query.ColumnRef:
				found = true
			}
			return !found
		})
	}
	p.mentionMemo[n] = found
	return found
}

// mentionsColumn reports whether n refers to a column.
func (p *planner) mentionsColumn(n *pg_query.Node) bool {
	found := false
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if _, ok := m.Interface().(*pg_query.ColumnRef); ok {
			found = true
		}
		return !found
	})
	return found
}
