package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// deparseStmt deparses one statement.
func deparseStmt(n *pg_query.Node) (string, error) {
	s, err := pg_query.Deparse(&pg_query.ParseResult{Stmts: []*pg_query.RawStmt{{Stmt: n}}})
	if err != nil {
		return "", reject(pgerr.FeatureNotSupported, -1, "statement cannot be rewritten: %v", err)
	}
	return s, nil
}

// deparseExpr deparses an expression as the only target of a SELECT and
// strips the SELECT, so the expression is printed exactly as PostgreSQL's
// own deparser would print it inside a query.
func deparseExpr(n *pg_query.Node) (string, error) {
	sel := &pg_query.SelectStmt{
		TargetList:  []*pg_query.Node{{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{Val: n, Location: -1}}}},
		LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg_query.SetOperation_SETOP_NONE,
	}
	s, err := deparseStmt(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}})
	if err != nil {
		return "", err
	}
	out, ok := strings.CutPrefix(s, "SELECT ")
	if !ok {
		return "", reject(pgerr.FeatureNotSupported, -1, "expression cannot be rewritten")
	}
	if err := faithful(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}, s); err != nil {
		return "", err
	}
	return out, nil
}

// faithful checks that text, the deparse of n, parses back to n (locations
// aside). pg_query's deparser has known precedence slips (it prints
// (a = b) BETWEEN c AND d without the parentheses, which PostgreSQL reads
// as a = (b BETWEEN c AND d)); SQL that would not mean what was checked is
// refused rather than sent.
func faithful(n *pg_query.Node, text string) error {
	tree, err := pg_query.Parse(text)
	if err != nil || len(tree.Stmts) != 1 || !sameTree(n, tree.Stmts[0].Stmt) {
		return reject(pgerr.FeatureNotSupported, -1, "this query cannot be rewritten faithfully (a limitation of the SQL printer); add parentheses or simplify it")
	}
	return nil
}

// sameTree compares two parse trees, ignoring locations.
func sameTree(a, b *pg_query.Node) bool {
	ca, cb := proto.Clone(a), proto.Clone(b)
	clearLocations(ca.ProtoReflect())
	clearLocations(cb.ProtoReflect())
	return proto.Equal(ca, cb)
}

func clearLocations(m protoreflect.Message) {
	walk(m, func(m protoreflect.Message) bool {
		if fd := m.Descriptor().Fields().ByName("location"); fd != nil {
			m.Clear(fd)
		}
		return true
	})
}

// parenExpr is deparseExpr wrapped in parentheses, so that it binds as one
// operand wherever it is embedded.
func parenExpr(n *pg_query.Node) (string, error) {
	s, err := deparseExpr(n)
	if err != nil {
		return "", err
	}
	return "(" + s + ")", nil
}

// quoteIdent quotes a name as the deparser does (only when needed).
func quoteIdent(name string) (string, error) {
	return deparseExpr(&pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
		Fields: []*pg_query.Node{pg_query.MakeStrNode(name)}, Location: -1,
	}}})
}

// quoteLiteral quotes a string constant. Values with a backslash use an
// escape string, which reads the same whatever standard_conforming_strings is.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// numLit prints a bound as an exact decimal literal.
func numLit(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if strings.HasPrefix(s, "-") {
		return "(" + s + ")"
	}
	return s
}

func intLit(v int64) string { return fmt.Sprint(v) }
