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
// scale stays far below PostgreSQL's limit whatever the rows hold.
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
					return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic on column %s is refused on private table %s: it needs lower and upper bounds and a number type (overflow would depend on private values)", describe(*side), tname)
				}
				out = p.arithOperand(ref, out)
			} else if (*side).GetAExpr() == nil {
				return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "arithmetic on %s is refused on private table %s: only bounded columns and constants may be combined", describe(*side), tname)
			}
		}
		*side = out
	}
	if d&depColumn != 0 && op == "/" {
		v, ok := numConst(e.Rexpr)
		if key || !ok || v == 0 {
			return texpr{}, reject(pgerr.InsufficientPrivilege, e.Location, "division is refused in group keys and conditions, and elsewhere allowed only by a non-zero constant, on private table %s", tname)
		}
	}
	if err := p.arithInRange(n); err != nil {
		return texpr{}, err
	}
	return texpr{out: &pg_query.Node{Node: &pg_query.Node_AExpr{AExpr: c}}, typ: "numeric", deps: d}, nil
}
