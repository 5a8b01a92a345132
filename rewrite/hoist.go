package rewrite

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Constants first. PostgreSQL folds a constant subexpression before any
// row is read only when every function in it is immutable: 'x'::text::date
// (text → date input is stable), to_date(...), now() - interval '30 days',
// $1::text::timestamptz are evaluated on every row that reaches them, so
// their failure in a CASE branch or a FILTER told whether such a row
// exists. So every subexpression of a private query whose inputs are all
// constants or parameters is hoisted out of it: the plan lists it (Const),
// the proxy evaluates all of them in one statement that reads no table,
// before the charge (an error there is about the client's constants and is
// reported as such, nothing charged), and binds the values to the
// rewritten SQL as parameters of the types they came back with. Only the
// functions and casts of constFuncs and castTypeNames may be evaluated
// this way: no side effects, no table or setting read, bounded memory.
//
// Two kinds of constants stay inline: plain literals ('2024-03-01',
// '2024-03-01'::date, 42, NULL; PostgreSQL converts them when it parses
// the query), and arithmetic of number literals (2 * 1.5), which is
// immutable, folded when the query is planned, and whose value the range
// check of arithmetic over columns needs (arithInRange). The latter is
// still evaluated before the charge (a Const with Param 0), so an overflow
// of the literals is not charged either.

// Const is a constant subexpression of a private query, evaluated by the
// proxy before any private row is read.
type Const struct {
	// SQL is the expression (deparsed); it may reference the client's
	// parameters $1..$NumParams.
	SQL string
	// Param is the parameter of Plan.SQL the value is bound to, or 0 when
	// the expression stays inline and is only evaluated to check that it
	// does not fail.
	Param int
}

// TypeCheck constrains the type of a value bound per execution (a client
// parameter or a hoisted constant), which is known only when the query
// runs: compared with a column, a parameter of another type could need a
// conversion of every row's value that is not total (numeric → float8).
type TypeCheck struct {
	Param int      // $n of Plan.SQL
	Types []string // the type names it may have (TypeName)
	What  string   // where it is used, for the refusal
	// Pattern says the value is a LIKE or ILIKE pattern (knex and other
	// query builders bind it, $1): PostgreSQL reports a pattern ending in
	// the escape character only when matching a row reaches its end, so
	// the proxy checks the bound value (CheckPattern) before the charge.
	Pattern bool
}

// CheckPattern refuses a LIKE pattern bound as a parameter or evaluated
// as a constant that PostgreSQL could fail on (one ending in the escape
// character), with PostgreSQL's message; value is the pattern's text (the
// text and binary formats of the string types are the same bytes), nil
// for NULL.
func (c TypeCheck) CheckPattern(value []byte) error {
	if !c.Pattern || value == nil {
		return nil
	}
	if n := utf8.RuneCount(value); n > maxLikePattern {
		return &RejectError{Code: pgerr.FeatureNotSupported, Refusal: true, Message: fmt.Sprintf("a LIKE pattern over a private table may have at most %d characters, this one has %d: "+
			"matching a long pattern costs time in proportion to each matching person's values, which the running time would reveal", maxLikePattern, n),
			Detail: "$" + strconv.Itoa(c.Param) + " is a LIKE pattern; dpproxy checks its value before reading any private row"}
	}
	if validLikePattern(string(value)) {
		return nil
	}
	return &RejectError{Code: pgerr.InsufficientPrivilege, Refusal: true, Message: "LIKE pattern must not end with escape character",
		Detail: "$" + strconv.Itoa(c.Param) + " is a LIKE pattern; dpproxy checks it before reading any private row, as PostgreSQL would fail on it only when a row reaches its end"}
}

// Check refuses a value of type oid (42501), naming where it is used.
func (c TypeCheck) Check(oid uint32) error {
	if name := TypeName(oid); name != "" && contains(c.Types, name) {
		return nil
	}
	name := TypeName(oid)
	if name == "" {
		name = "type oid " + strconv.FormatUint(uint64(oid), 10)
	}
	return &RejectError{Code: pgerr.InsufficientPrivilege, Refusal: true, Message: "$" + strconv.Itoa(c.Param) + " has type " + name + ", which cannot be " + c.What +
		" without a conversion that can fail on some rows; allowed: " + strings.Join(c.Types, ", ")}
}

// SeedParam is the number of the parameter of Plan.SQL that takes the
// fresh secret seed: after the client's parameters and the hoisted
// constants.
func (p *Plan) SeedParam() int {
	n := p.NumParams
	for _, c := range p.Consts {
		n = max(n, c.Param)
	}
	return n + 1
}

// totality is what the planner collects while it checks a private query's
// expressions: the hoisted constants, the type checks, and the checked
// forms of the WHERE clause and join conditions, which replace them in the
// rewrite only once nothing else reads the flattened statement.
type totality struct {
	nparams int
	consts  []hoisted
	bySQL   map[string]int // index into consts
	checks  []TypeCheck
	later   []replacement
}

// hoisted is one hoisted constant: the Const of the plan and its
// expression, for ConstSQL.
type hoisted struct {
	c    Const
	node *pg_query.Node
}

type replacement struct{ at, with *pg_query.Node }

// replaceLater records that at (a node of the flattened statement) is to be
// printed as with.
func (t *totality) replaceLater(at, with *pg_query.Node) {
	t.later = append(t.later, replacement{at, with})
}

// apply replaces the recorded nodes in place.
func (t *totality) apply() {
	for _, r := range t.later {
		r.at.Node = r.with.Node
	}
	t.later = nil
}

// finish fills in the plan's constants and type checks.
func (t *totality) finish(plan *Plan) error {
	for _, h := range t.consts {
		plan.Consts = append(plan.Consts, h.c)
	}
	plan.TypeChecks = t.checks
	if len(t.consts) == 0 {
		return nil
	}
	sel := &pg_query.SelectStmt{LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT, Op: pg_query.SetOperation_SETOP_NONE}
	for _, h := range t.consts {
		sel.TargetList = append(sel.TargetList, pg_query.MakeResTargetNodeWithVal(proto.Clone(h.node).(*pg_query.Node), -1))
	}
	sn := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}
	s, err := deparseStmt(sn)
	if err != nil {
		return err
	}
	if err := faithful(sn, s); err != nil {
		return err
	}
	plan.ConstSQL = s
	return nil
}

// check records a type check on parameter param; types nil means any
// known scalar type.
func (t *totality) check(param int, types []string, what string) {
	for _, c := range t.checks {
		if c.Param == param && c.What == what {
			return
		}
	}
	t.checks = append(t.checks, TypeCheck{Param: param, Types: types, What: what})
}

// checkPattern records that parameter param is a LIKE pattern: a string,
// whose value the proxy checks (TypeCheck.Pattern).
func (t *totality) checkPattern(param int) {
	for i, c := range t.checks {
		if c.Param == param && c.Pattern {
			return
		} else if c.Param == param && c.What == "a LIKE pattern" {
			t.checks[i].Pattern = true
			return
		}
	}
	t.checks = append(t.checks, TypeCheck{Param: param, Types: []string{"text", "varchar"}, What: "a LIKE pattern", Pattern: true})
}

// hoist records a constant expression and returns the parameter it is
// bound to (0 for one only checked).
func (t *totality) hoist(n *pg_query.Node, bind bool) (int, error) {
	sql, err := deparseExpr(n)
	if err != nil {
		return 0, err
	}
	if t.bySQL == nil {
		t.bySQL = map[string]int{}
	}
	if i, ok := t.bySQL[sql]; ok {
		if bind && t.consts[i].c.Param == 0 {
			t.consts[i].c.Param = t.nextParam()
		}
		return t.consts[i].c.Param, nil
	}
	c := Const{SQL: sql}
	if bind {
		c.Param = t.nextParam()
	}
	t.bySQL[sql] = len(t.consts)
	t.consts = append(t.consts, hoisted{c: c, node: n})
	return c.Param, nil
}

func (t *totality) nextParam() int {
	n := t.nparams
	for _, h := range t.consts {
		n = max(n, h.c.Param)
	}
	return n + 1
}

// isConstant reports whether n reads no column and holds no aggregate or
// subquery: its value is the same for every row.
func isConstant(n *pg_query.Node) bool {
	ok := true
	replaceNodes(n, func(x *pg_query.Node) bool {
		switch v := x.Node.(type) {
		case *pg_query.Node_ColumnRef, *pg_query.Node_SubLink:
			ok = false
		case *pg_query.Node_FuncCall:
			if isAggregate(v.FuncCall) {
				ok = false
			}
		}
		return !ok
	})
	return ok
}

// constant handles a constant expression in a private query: a literal or
// a client parameter as it is, arithmetic of number literals inline (and
// checked), anything else hoisted. ok is false when n is not constant.
func (p *planner) constant(n *pg_query.Node) (t texpr, ok bool, err error) {
	if !isConstant(n) {
		return texpr{}, false, nil
	}
	if lt, lit := literalType(n); lit {
		if _, err := p.constCheck(n); err != nil {
			return texpr{}, true, err
		}
		if numberTree(n) && n.GetAConst() == nil {
			if _, err := p.tot.hoist(n, false); err != nil {
				return texpr{}, true, err
			}
		}
		return texpr{out: n, typ: lt, lit: true}, true, nil
	}
	if pr := n.GetParamRef(); pr != nil {
		return texpr{out: n, deps: depParam, slot: int(pr.Number)}, true, nil
	}
	if _, err := p.constCheck(n); err != nil {
		return texpr{}, true, err
	}
	param, err := p.tot.hoist(n, true)
	if err != nil {
		return texpr{}, true, err
	}
	ref := &pg_query.Node{Node: &pg_query.Node_ParamRef{ParamRef: &pg_query.ParamRef{Number: int32(param), Location: -1}}}
	return texpr{out: ref, deps: depParam, slot: param}, true, nil
}

// literalType reports whether n is a literal PostgreSQL converts before
// reading any row, and its type ("" for an untyped string or NULL): a
// constant, a string constant cast to a type of the table, or arithmetic
// of number literals.
func literalType(n *pg_query.Node) (string, bool) {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		c := x.AConst
		switch v := c.Val.(type) {
		case *pg_query.A_Const_Ival:
			return "int4", true
		case *pg_query.A_Const_Fval:
			if _, err := strconv.ParseInt(v.Fval.Fval, 10, 64); err == nil {
				return "int8", true
			}
			return "numeric", true
		case *pg_query.A_Const_Boolval:
			return "bool", true
		case *pg_query.A_Const_Bsval:
			return "bit", true
		}
		return "", true
	case *pg_query.Node_TypeCast:
		t, ok := castType(x.TypeCast.TypeName)
		if !ok {
			return "", false
		}
		if c := x.TypeCast.Arg.GetAConst(); c != nil && (c.Isnull || c.GetSval() != nil) {
			return t, true
		}
		if numberTree(x.TypeCast.Arg) && isNumericFamily(t) {
			return t, true
		}
	case *pg_query.Node_AExpr:
		if numberTree(n) {
			return "numeric", true
		}
	}
	return "", false
}

// numberTree reports whether n is a number literal, or +, -, *, / of them,
// possibly cast to a number type: immutable, folded when the query is
// planned.
func numberTree(n *pg_query.Node) bool {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		switch x.AConst.Val.(type) {
		case *pg_query.A_Const_Ival, *pg_query.A_Const_Fval:
			return true
		}
	case *pg_query.Node_TypeCast:
		t, ok := castType(x.TypeCast.TypeName)
		return ok && isNumericFamily(t) && numberTree(x.TypeCast.Arg)
	case *pg_query.Node_AExpr:
		e := x.AExpr
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
			return false
		}
		switch e.Name[0].GetString_().GetSval() {
		case "+", "-", "*", "/":
		default:
			return false
		}
		return (e.Lexpr == nil || numberTree(e.Lexpr)) && numberTree(e.Rexpr)
	}
	return false
}

// castType returns the table's name for a cast's target type, or false
// when the type is not one a private query may cast to (arrays, domains,
// regclass and its kin, user types).
func castType(t *pg_query.TypeName) (string, bool) {
	if t == nil || len(t.ArrayBounds) > 0 || t.Setof || t.PctType || len(t.Names) == 0 || len(t.Names) > 2 {
		return "", false
	}
	if len(t.Names) == 2 && t.Names[0].GetString_().GetSval() != "pg_catalog" {
		return "", false
	}
	name, ok := castTypeNames[t.Names[len(t.Names)-1].GetString_().GetSval()]
	return name, ok
}

func typeNameString(t *pg_query.TypeName) string {
	var parts []string
	for _, n := range t.GetNames() {
		parts = append(parts, n.GetString_().GetSval())
	}
	s := strings.Join(parts, ".")
	if len(t.GetArrayBounds()) > 0 {
		s += "[]"
	}
	return s
}

// constCheck checks that a constant expression uses only what may be
// evaluated before the query runs (constFuncs, constOps, casts to the
// table's types) and returns n.
func (p *planner) constCheck(n *pg_query.Node) (*pg_query.Node, error) {
	tname := p.table.QualifiedName()
	var check func(n *pg_query.Node) error
	all := func(ns ...*pg_query.Node) error {
		for _, x := range ns {
			if x == nil {
				continue
			}
			if err := check(x); err != nil {
				return err
			}
		}
		return nil
	}
	check = func(n *pg_query.Node) error {
		switch x := n.GetNode().(type) {
		case *pg_query.Node_AConst, *pg_query.Node_ParamRef:
			return nil
		case *pg_query.Node_TypeCast:
			if _, ok := castType(x.TypeCast.TypeName); !ok {
				return reject(pgerr.InsufficientPrivilege, x.TypeCast.Location, "a cast to type %s is not allowed in a query over private table %s: only casts to the scalar types of dpproxy's totality table are (%s)",
					typeNameString(x.TypeCast.TypeName), tname, strings.Join(sortedCastTypes(), ", "))
			}
			return check(x.TypeCast.Arg)
		case *pg_query.Node_FuncCall:
			fc := x.FuncCall
			schema, name := funcName(fc)
			if (schema != "" && schema != "pg_catalog") || !constFuncs[name] || fc.AggStar || fc.AggDistinct ||
				fc.FuncVariadic || fc.AggFilter != nil || fc.Over != nil || len(fc.AggOrder) > 0 || fc.AggWithinGroup {
				return reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed on constants in a query over private table %s: dpproxy evaluates constant expressions before reading any row, and only side-effect-free date, string and number functions may be evaluated", name, tname)
			}
			return all(fc.Args...)
		case *pg_query.Node_AExpr:
			e := x.AExpr
			op := ""
			if len(e.Name) == 1 {
				op = e.Name[0].GetString_().GetSval()
			}
			switch e.Kind {
			case pg_query.A_Expr_Kind_AEXPR_OP:
				if !constOps[op] {
					return reject(pgerr.InsufficientPrivilege, e.Location, "operator %s is not allowed on constants in a query over private table %s", op, tname)
				}
			case pg_query.A_Expr_Kind_AEXPR_IN, pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
				pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
				pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NULLIF,
				pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
				if !constOps[op] {
					return reject(pgerr.InsufficientPrivilege, e.Location, "operator %s is not allowed on constants in a query over private table %s", op, tname)
				}
			default:
				return reject(pgerr.InsufficientPrivilege, e.Location, "%s is not allowed on constants in a query over private table %s", aExprKindName(e.Kind), tname)
			}
			if l := e.Rexpr.GetList(); l != nil {
				return all(append([]*pg_query.Node{e.Lexpr}, l.Items...)...)
			}
			return all(e.Lexpr, e.Rexpr)
		case *pg_query.Node_BoolExpr:
			return all(x.BoolExpr.Args...)
		case *pg_query.Node_NullTest:
			return check(x.NullTest.Arg)
		case *pg_query.Node_BooleanTest:
			return check(x.BooleanTest.Arg)
		case *pg_query.Node_CaseExpr:
			c := x.CaseExpr
			if err := all(c.Arg, c.Defresult); err != nil {
				return err
			}
			for _, w := range c.Args {
				cw := w.GetCaseWhen()
				if cw == nil {
					return reject(pgerr.FeatureNotSupported, c.Location, "malformed CASE")
				}
				if err := all(cw.Expr, cw.Result); err != nil {
					return err
				}
			}
			return nil
		case *pg_query.Node_CoalesceExpr:
			return all(x.CoalesceExpr.Args...)
		case *pg_query.Node_MinMaxExpr:
			return all(x.MinMaxExpr.Args...)
		case *pg_query.Node_SqlvalueFunction:
			if !constSQLValueFunctions[x.SqlvalueFunction.Op] {
				return reject(pgerr.InsufficientPrivilege, x.SqlvalueFunction.Location, "%s is not allowed in a query over private table %s", sqlValueFunctionName(x.SqlvalueFunction.Op), tname)
			}
			return nil
		}
		return reject(pgerr.FeatureNotSupported, -1, "%s is not supported on constants in a query over private table %s", describe(n), tname)
	}
	return n, check(n)
}

func sqlValueFunctionName(op pg_query.SQLValueFunctionOp) string {
	return strings.ToUpper(strings.TrimPrefix(strings.TrimSuffix(op.String(), "_N"), "SVFOP_"))
}

func sortedCastTypes() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range castTypeNames {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
