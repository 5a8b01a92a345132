package rewrite

import (
	"math/big"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Arithmetic between columns in conditions (WHERE amount * quantity >
// 100), decided by the columns' types. In a condition the arithmetic is
// printed as written, so that it means what PostgreSQL means by it (an
// integer division stays one; arith.go's numeric form is for aggregate
// arguments and keys), and it is total only when no value of its
// operands' types can make it overflow its result type. So every operand
// must have a largest magnitude known from its type alone, whatever the
// rows hold:
//
//   - int2, int4, int8: 2^15, 2^31, 2^63;
//   - numeric with a declared precision and scale (numeric(10,2),
//     declaredNumeric, as for arithmetic in aggregate arguments and keys,
//     arith.go's typeDigits, which clamps the unbounded types instead):
//     10^(precision − scale), read from the upstream at start
//     (Options.NumericTypmods; such a column holds no infinity, and NaN
//     propagates without failing). An unconstrained numeric holds values
//     up to 10^131072, which a product can overflow, so it is refused;
//   - a number literal: its value (at most 30 digits after the point);
//   - extract(field FROM x): the field's range (extractRange; numeric);
//   - a cast to numeric or to a wider integer: its argument's magnitude.
//
// The result type is PostgreSQL's (integers of one width stay that width,
// anything with numeric is numeric), and the result's magnitude (sum for
// + and −, product for *, the dividend for a division by a non-zero
// constant other than −1 for integers) must stay within it: int4 * int4
// can overflow int4 and is refused (cast one side to numeric or bigint:
// quantity::numeric * product_id); numeric(10,2) * int4 is at most
// 10^8 · 2^31 and is accepted. numeric's limit is taken as 10^131071
// and its scale as at most 8000 digits (PostgreSQL fails beyond 16383).
// Floats are refused: float8 overflows to an error, and a product can
// underflow to one too (and a float cast to numeric is unbounded).
// Parameters and hoisted constants are refused too: their value is not
// known when the query is checked.

// condMag is the largest magnitude and scale of a condition's arithmetic
// operand, and the type PostgreSQL computes it in.
type condMag struct {
	mag   *big.Float
	scale int
	typ   string
}

var (
	intMag = map[string]*big.Float{
		"int2": new(big.Float).SetInt64(1 << 15), "int4": new(big.Float).SetInt64(1 << 31),
		"int8": new(big.Float).SetMantExp(big.NewFloat(1), 63),
	}
	intMax = map[string]*big.Float{
		"int2": new(big.Float).SetInt64(1<<15 - 1), "int4": new(big.Float).SetInt64(1<<31 - 1),
		"int8": new(big.Float).SetInt64(1<<63 - 1),
	}
	numericMax = pow10(131071)
)

const condMaxScale = 8000

// pow10 is 10^n (n may be negative), to 256 bits.
func pow10(n int) *big.Float {
	neg := n < 0
	if neg {
		n = -n
	}
	r := new(big.Float).SetPrec(256).SetInt64(1)
	b := new(big.Float).SetPrec(256).SetInt64(10)
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r.Mul(r, b)
		}
		b.Mul(b, b)
	}
	if neg {
		return new(big.Float).SetPrec(256).Quo(big.NewFloat(1), r)
	}
	return r
}

// condArith checks arithmetic in a condition and returns it as written,
// its operands checked.
func (p *planner) condArith(e *pg_query.A_Expr) (texpr, error) {
	n := &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: e}}
	m, d, out, err := p.condOperand(n)
	if err != nil {
		return texpr{}, err
	}
	return texpr{out: out, typ: m.typ, deps: d}, nil
}

func (p *planner) condRefuse(n *pg_query.Node, why string) error {
	return reject(pgerr.InsufficientPrivilege, exprLocation(n), "arithmetic on %s is refused in a condition on private table %s: %s", describe(n), p.table.QualifiedName(), why).
		WithHint("Arithmetic in conditions is allowed between integer columns, numeric columns of declared precision (numeric(p,s)) and number literals when no value of their types can overflow the result: cast an integer side to numeric (quantity::numeric * product_id).")
}

// condOperand returns the magnitude of an operand of arithmetic in a
// condition, its dependencies and its checked form.
func (p *planner) condOperand(n *pg_query.Node) (condMag, deps, *pg_query.Node, error) {
	if t, ok, err := p.constant(n); ok {
		if err != nil {
			return condMag{}, 0, nil, err
		}
		v, isNum := numConst(n)
		if !t.lit || !isNum || !numberTree(n) || n.GetAConst() == nil {
			return condMag{}, 0, nil, p.condRefuse(n, "only number literals may be combined with columns there (a parameter's value is not known when the query is checked)")
		}
		scale := 0
		if f := n.GetAConst().GetFval(); f != nil {
			scale = decimalScale(f.Fval)
		}
		if scale > maxArithScale {
			return condMag{}, 0, nil, p.condRefuse(n, "a constant has more than 30 digits after the point")
		}
		typ := t.typ
		if typ == "int8" && v >= -(1<<31) && v < 1<<31 {
			typ = "int4"
		}
		return condMag{mag: new(big.Float).Abs(big.NewFloat(v)), scale: scale, typ: typ}, 0, n, nil
	}
	switch x := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		t, err := p.expr(n, true)
		if err != nil {
			return condMag{}, 0, nil, err
		}
		if m, ok := intMag[t.typ]; ok {
			return condMag{mag: m, typ: t.typ}, t.deps, t.out, nil
		}
		if t.typ == "numeric" {
			c, err := p.column(x.ColumnRef)
			if err == nil {
				if tm, ok := p.declaredNumeric(c); ok {
					return condMag{mag: pow10(tm[0] - tm[1]), scale: tm[1], typ: "numeric"}, t.deps, t.out, nil
				}
			}
			return condMag{}, 0, nil, p.condRefuse(n, "column "+describe(n)+" is an unconstrained numeric, which can hold values whose product overflows")
		}
		return condMag{}, 0, nil, p.condRefuse(n, "column "+describe(n)+" has type "+shownType(t.typ)+" (only integers and numeric(p,s))")
	case *pg_query.Node_TypeCast:
		to, ok := castType(x.TypeCast.TypeName)
		if !ok || len(x.TypeCast.TypeName.Typmods) > 0 || (to != "numeric" && intMag[to] == nil) {
			break
		}
		m, d, inner, err := p.condOperand(x.TypeCast.Arg)
		if err != nil {
			return condMag{}, 0, nil, err
		}
		if intMag[to] != nil && (intMag[m.typ] == nil || intMag[m.typ].Cmp(intMag[to]) > 0) {
			break // narrowing or numeric to integer: can fail
		}
		c := proto.Clone(x.TypeCast).(*pg_query.TypeCast)
		c.Arg = inner
		return condMag{mag: m.mag, scale: m.scale, typ: to}, d, &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: c}}, nil
	case *pg_query.Node_FuncCall:
		if field, ok := extractField(n); ok {
			_, name := funcName(x.FuncCall)
			lo, hi, _, ok := extractRange(field)
			if ok && name == "extract" {
				t, err := p.expr(n, true)
				if err != nil {
					return condMag{}, 0, nil, err
				}
				mag := big.NewFloat(max(-lo, hi))
				return condMag{mag: mag, scale: 6, typ: "numeric"}, t.deps, t.out, nil
			}
		}
	case *pg_query.Node_AExpr:
		e := x.AExpr
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
			break
		}
		op := e.Name[0].GetString_().GetSval()
		if op != "+" && op != "-" && op != "*" && op != "/" {
			return condMag{}, 0, nil, p.condRefuse(n, "operator "+op+" is not allowed there")
		}
		if t, ok, err := p.datetimeInterval(e, true); ok {
			if err != nil {
				return condMag{}, 0, nil, err
			}
			return condMag{typ: t.typ}, t.deps, t.out, nil
		}
		a, da, lo, err := p.condOperand(e.Lexpr)
		if err != nil {
			return condMag{}, 0, nil, err
		}
		b, db, ro, err := p.condOperand(e.Rexpr)
		if err != nil {
			return condMag{}, 0, nil, err
		}
		if a.mag == nil || b.mag == nil {
			return condMag{}, 0, nil, p.condRefuse(n, "only numbers may be combined")
		}
		typ := arithSem([]string{a.typ, b.typ})
		if typ == "float8" {
			return condMag{}, 0, nil, p.condRefuse(n, "float arithmetic can overflow or underflow to an error")
		}
		var r condMag
		r.typ = typ
		switch op {
		case "+", "-":
			r.mag, r.scale = new(big.Float).Add(a.mag, b.mag), max(a.scale, b.scale)
		case "*":
			r.mag, r.scale = new(big.Float).Mul(a.mag, b.mag), a.scale+b.scale
		case "/":
			v, ok := numConst(e.Rexpr)
			if !ok || v == 0 || (v == -1 && intMag[typ] != nil) {
				return condMag{}, 0, nil, p.condRefuse(n, "a divisor must be a non-zero constant (and not -1 for integers, whose smallest value divided by -1 overflows)")
			}
			r.mag, r.scale = new(big.Float).Set(a.mag), max(a.scale, b.scale)+20
			if bv := new(big.Float).Abs(big.NewFloat(v)); bv.Cmp(big.NewFloat(1)) < 0 {
				r.mag.Quo(r.mag, bv)
			}
		}
		limit := numericMax
		if m, ok := intMax[typ]; ok {
			limit = m
		}
		intDiv := op == "/" && intMax[typ] != nil // |result| <= |dividend|: within the type
		if r.mag.Cmp(limit) > 0 && !intDiv {
			return condMag{}, 0, nil, p.condRefuse(n, "its result can exceed type "+typ+" for some values of its operands' types, and PostgreSQL would fail on those rows")
		}
		if r.scale > condMaxScale {
			return condMag{}, 0, nil, p.condRefuse(n, "its result can have too many digits after the point")
		}
		c := proto.Clone(e).(*pg_query.A_Expr)
		c.Lexpr, c.Rexpr = lo, ro
		return r, da | db, &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, nil
	}
	return condMag{}, 0, nil, p.condRefuse(n, describe(n)+" is not a column, number literal or extract(...) of known range")
}

// NumericTypmodsSQL reads the declared precision and scale of the numeric
// columns of the tables named by $1 ("schema.table"), as
// Options.NumericTypmods wants them (a domain's own typmod over numeric
// too). Each row: "schema.table.column", precision, scale.
const NumericTypmodsSQL = `SELECT n.nspname || '.' || c.relname || '.' || a.attname,
	((coalesce(nullif(a.atttypmod, -1), t.typtypmod) - 4) >> 16) & 65535,
	((((coalesce(nullif(a.atttypmod, -1), t.typtypmod) - 4) & 2047) # 1024) - 1024)
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE n.nspname || '.' || c.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.atttypid = 'pg_catalog.numeric'::pg_catalog.regtype AND a.atttypmod >= 0
       OR t.typtype = 'd' AND t.typbasetype = 'pg_catalog.numeric'::pg_catalog.regtype AND a.atttypmod < 0 AND t.typtypmod >= 0)`
