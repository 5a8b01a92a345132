package rewrite

import (
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Bounded joins (docs/threat-model.md, "Timing").
//
// A join with a public table may multiply the rows, and so the work, that
// one person's rows cause: `JOIN clinics c ON true` five times over turns
// a patient's 8 rows into 8·50^4 and makes a query 21 times slower exactly
// when that patient exists. Clamping after the join bounds the person's
// contribution to the answer but not the query's running time, which the
// analyst sees. So a private table is joined only with public tables of
// which each of its rows can match at most one row: every column of some
// unique key of the public table is equated, in a conjunct of the join
// condition, with a value that is already fixed for that row (a column of
// the private table or of a public table already so bound, a constant, a
// parameter). Then the join's output has at most one row per private row,
// and the work per private row is one probe per public table.
//
// The keys are read from the upstream's catalog at start (UniqueKeysSQL):
// primary keys and unique indexes that are valid, not partial and on plain
// columns, of tables that are not parents in an inheritance tree (a
// parent's index does not cover its children; a partitioned table's does).
// Nullable key columns are fine: `=` never matches NULL, so rows whose key
// is NULL match nothing.

// Relation describes a configured table as the upstream has it.
type Relation struct {
	// Columns maps each column name to its type (format_type).
	Columns map[string]string
	// UniqueKeys are the column lists of the table's primary key and of
	// its unique indexes that guarantee one row per value (see above).
	UniqueKeys [][]string
}

// RelationColumnsSQL reads the columns of the relations named in $1
// ("schema.table"): relation, column, type. The proxy runs it once at start
// to fill Options.Relations.
const RelationColumnsSQL = `SELECT n.nspname || '.' || c.relname, a.attname::text, pg_catalog.format_type(a.atttypid, NULL)
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped`

// UniqueKeysSQL reads the unique keys of the relations named in $1: one row
// per key, relation and key columns in index order. Only indexes that
// guarantee at most one row per key value qualify: unique, valid (a failed
// CREATE UNIQUE INDEX CONCURRENTLY leaves an invalid one over duplicates),
// not partial, without expressions, and only the key columns (not INCLUDE
// ones); of a plain table with inheritance children none (the parent's
// index does not cover the children, which a query of the parent reads).
const UniqueKeysSQL = `SELECT n.nspname || '.' || c.relname,
  ARRAY(SELECT a.attname::text FROM pg_catalog.generate_series(0, i.indnkeyatts - 1) AS k
        JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[k] ORDER BY k)
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname || '.' || c.relname = ANY($1::text[])
  AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
  AND (c.relkind IN ('p', 'm') OR (c.relkind = 'r' AND NOT c.relhassubclass))`

// joinRel is one relation of a private query's FROM clause.
type joinRel struct {
	rv       *pg_query.RangeVar
	ref      *relRef
	info     *Relation // nil: unknown to the catalog
	private  bool
	nullable bool // on the nullable side of an outer join
}

// refName is how the relation's columns may be qualified.
func (r *joinRel) refName() string {
	if r.rv.Alias != nil {
		return r.rv.Alias.Aliasname
	}
	return r.rv.Relname
}

// joinEq is a conjunct `a = b` of a join condition or of WHERE, with the
// relations whose rows it may fix: those it filters (both sides of an
// inner join, the nullable side of an outer one; for WHERE, those on no
// nullable side).
type joinEq struct {
	l, r  *pg_query.Node
	scope map[int]bool
	// using is set for USING (col): l and r are the column's candidate
	// relations on each side.
	using        string
	lrels, rrels []int
}

// boundedJoins refuses a join of the private table with a public table of
// which one private row could match several rows (see the comment above).
// It runs on the flattened statement, so a public CTE or a derived table
// is judged on what it inlines to.
func (p *planner) boundedJoins(sel *pg_query.SelectStmt) error {
	var rels []*joinRel
	var eqs []joinEq
	var visit func(n *pg_query.Node, nullable bool) []int
	visit = func(n *pg_query.Node, nullable bool) []int {
		switch x := n.GetNode().(type) {
		case *pg_query.Node_RangeVar:
			ref := p.rels[x.RangeVar]
			if ref == nil {
				return nil
			}
			r := &joinRel{rv: x.RangeVar, ref: ref, private: ref.class == relPrivate, nullable: nullable}
			r.info = p.a.opts.Relations[ref.qualified()]
			rels = append(rels, r)
			return []int{len(rels) - 1}
		case *pg_query.Node_JoinExpr:
			j := x.JoinExpr
			ln, rn := nullable, nullable
			switch j.Jointype {
			case pg_query.JoinType_JOIN_LEFT:
				rn = true
			case pg_query.JoinType_JOIN_RIGHT:
				ln = true
			}
			left := visit(j.Larg, ln)
			right := visit(j.Rarg, rn)
			scope := map[int]bool{}
			switch j.Jointype {
			case pg_query.JoinType_JOIN_LEFT:
				addAll(scope, right)
			case pg_query.JoinType_JOIN_RIGHT:
				addAll(scope, left)
			default:
				addAll(scope, left)
				addAll(scope, right)
			}
			for _, c := range conjuncts(j.Quals) {
				if l, r, ok := equality(c); ok {
					eqs = append(eqs, joinEq{l: l, r: r, scope: scope})
				}
			}
			for _, u := range j.UsingClause {
				name := u.GetString_().GetSval()
				eqs = append(eqs, joinEq{using: name, lrels: p.withColumn(rels, left, name), rrels: p.withColumn(rels, right, name), scope: scope})
			}
			return append(left, right...)
		}
		return nil
	}
	for _, it := range sel.FromClause {
		visit(it, false)
	}
	if len(rels) < 2 {
		return nil
	}
	outer := map[int]bool{}
	for i, r := range rels {
		if !r.nullable {
			outer[i] = true
		}
	}
	for _, c := range conjuncts(sel.WhereClause) {
		if l, r, ok := equality(c); ok {
			eqs = append(eqs, joinEq{l: l, r: r, scope: outer})
		}
	}

	fixed := map[int]bool{}
	for i, r := range rels {
		if r.private {
			fixed[i] = true
		}
	}
	// A relation is fixed once every column of one of its unique keys is
	// equated with values of fixed relations; repeat until nothing changes.
	for changed := true; changed; {
		changed = false
		for i, r := range rels {
			if fixed[i] || r.info == nil {
				continue
			}
			bound := map[string]bool{}
			for _, e := range eqs {
				if !e.scope[i] {
					continue
				}
				for _, col := range p.bindings(rels, e, i, fixed) {
					bound[col] = true
				}
			}
			for _, key := range r.info.UniqueKeys {
				all := len(key) > 0
				for _, c := range key {
					all = all && bound[c]
				}
				if all {
					fixed[i], changed = true, true
					break
				}
			}
		}
	}
	for i, r := range rels {
		if !fixed[i] && !r.private {
			return p.unboundedJoin(r)
		}
	}
	return nil
}

// unboundedJoin is the refusal for public relation r.
func (p *planner) unboundedJoin(r *joinRel) error {
	name, priv := r.ref.qualified(), p.table.QualifiedName()
	err := reject(pgerr.FeatureNotSupported, r.rv.Location,
		"public table %s must be joined on a unique key: each row of private table %s may match at most one of its rows; "+
			"equate (=, combined with AND) every column of a unique key of %s with a column of %s, of a table joined that way, or a constant",
		name, priv, name, priv).
		WithDetail("ON true, a cross join or a join on columns that are not a unique key lets one person's rows multiply the query's work, and its running time would tell whether that person is there.")
	if r.info == nil || len(r.info.UniqueKeys) == 0 {
		return err.WithHint("%s has no primary key or unique index that dpproxy could read from the database (valid, not partial, on plain columns): it cannot be joined with a private table.", name)
	}
	keys := make([]string, len(r.info.UniqueKeys))
	for i, k := range r.info.UniqueKeys {
		keys[i] = "(" + strings.Join(k, ", ") + ")"
	}
	sort.Strings(keys)
	return err.WithHint("Unique keys of %s: %s.", name, strings.Join(keys, ", "))
}

func addAll(m map[int]bool, is []int) {
	for _, i := range is {
		m[i] = true
	}
}

// conjuncts splits n at its top-level ANDs.
func conjuncts(n *pg_query.Node) []*pg_query.Node {
	if n == nil {
		return nil
	}
	if b := n.GetBoolExpr(); b != nil && b.Boolop == pg_query.BoolExprType_AND_EXPR {
		var out []*pg_query.Node
		for _, a := range b.Args {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []*pg_query.Node{n}
}

// equality returns the operands of a = b (the built-in = of pg_catalog).
func equality(n *pg_query.Node) (l, r *pg_query.Node, ok bool) {
	e := n.GetAExpr()
	if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || e.Lexpr == nil || e.Rexpr == nil {
		return nil, nil, false
	}
	switch len(e.Name) {
	case 1:
	case 2:
		if e.Name[0].GetString_().GetSval() != "pg_catalog" {
			return nil, nil, false
		}
	default:
		return nil, nil, false
	}
	if e.Name[len(e.Name)-1].GetString_().GetSval() != "=" {
		return nil, nil, false
	}
	return e.Lexpr, e.Rexpr, true
}

// bindings returns the columns of relation i that equality e equates with a
// value fixed by the relations in fixed (i itself excluded).
func (p *planner) bindings(rels []*joinRel, e joinEq, i int, fixed map[int]bool) []string {
	if e.using != "" {
		var out []string
		if len(e.rrels) == 1 && e.rrels[0] == i && allFixed(e.lrels, fixed, i) {
			out = append(out, e.using)
		}
		if len(e.lrels) == 1 && e.lrels[0] == i && allFixed(e.rrels, fixed, i) {
			out = append(out, e.using)
		}
		return out
	}
	var out []string
	for _, side := range [2][2]*pg_query.Node{{e.l, e.r}, {e.r, e.l}} {
		key, val := side[0].GetColumnRef(), side[1]
		if key == nil {
			continue
		}
		ri, col := p.resolveJoinColumn(rels, key)
		if ri != i {
			continue
		}
		deps, ok := p.valueDeps(rels, val, rels[i].info.Columns[col])
		if ok && allFixed(deps, fixed, i) {
			out = append(out, col)
		}
	}
	return out
}

// allFixed reports whether every relation in rs is fixed and none is i.
func allFixed(rs []int, fixed map[int]bool, i int) bool {
	if rs == nil {
		return false
	}
	for _, r := range rs {
		if r == i || !fixed[r] {
			return false
		}
	}
	return true
}

// valueDeps returns the relations a value depends on when it is one value
// per row of them: a column, a constant, a parameter, or a cast of one.
// A float value is refused for a key that is not a float, which
// PostgreSQL would compare as float, where distinct keys can be equal.
func (p *planner) valueDeps(rels []*joinRel, n *pg_query.Node, keyType string) ([]int, bool) {
	keyFloat := isFloatType(keyType)
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		return []int{}, !x.AConst.Isnull
	case *pg_query.Node_ParamRef:
		return []int{}, true
	case *pg_query.Node_TypeCast:
		names := x.TypeCast.TypeName.GetNames()
		if len(names) > 0 && !keyFloat && isFloatType(names[len(names)-1].GetString_().GetSval()) {
			return nil, false
		}
		return p.valueDeps(rels, x.TypeCast.Arg, keyType)
	case *pg_query.Node_ColumnRef:
		ri, col := p.resolveJoinColumn(rels, x.ColumnRef)
		if ri < 0 {
			return nil, false
		}
		if info := rels[ri].info; info != nil && !keyFloat && isFloatType(info.Columns[col]) {
			return nil, false
		}
		return []int{ri}, true
	}
	return nil, false
}

func isFloatType(t string) bool {
	switch t {
	case "real", "double precision", "float4", "float8", "float":
		return true
	}
	return false
}

// resolveJoinColumn finds the relation a column reference names and the
// column's name, or -1: an unqualified name belongs to the one relation
// that has a column of that name (the private table's privacy unit and
// configured columns count as its columns even when the catalog is
// unknown).
func (p *planner) resolveJoinColumn(rels []*joinRel, c *pg_query.ColumnRef) (int, string) {
	n := len(c.Fields)
	if n == 0 || c.Fields[n-1].GetString_() == nil {
		return -1, ""
	}
	name := c.Fields[n-1].GetString_().GetSval()
	found := -1
	for i, r := range rels {
		match := false
		switch n {
		case 1:
			match = p.hasColumn(r, name)
		case 2:
			match = c.Fields[0].GetString_().GetSval() == r.refName()
		case 3:
			match = r.rv.Alias == nil && c.Fields[0].GetString_().GetSval() == r.ref.schema && c.Fields[1].GetString_().GetSval() == r.rv.Relname
		}
		if !match {
			continue
		}
		if found >= 0 {
			return -1, "" // ambiguous: PostgreSQL refuses it too
		}
		found = i
	}
	return found, name
}

// hasColumn reports whether relation r has a column called name, as far as
// the catalog (or, for the private table, its configuration) tells.
func (p *planner) hasColumn(r *joinRel, name string) bool {
	if r.info != nil {
		if _, ok := r.info.Columns[name]; ok {
			return true
		}
	}
	return r.private && (name == r.ref.table.PrivacyUnit || r.ref.table.Columns[name] != nil)
}

// withColumn returns the relations among is that have a column called name.
func (p *planner) withColumn(rels []*joinRel, is []int, name string) []int {
	var out []int
	for _, i := range is {
		if p.hasColumn(rels[i], name) {
			out = append(out, i)
		}
	}
	return out
}
