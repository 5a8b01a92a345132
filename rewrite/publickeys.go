package rewrite

import (
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Public group keys from a joined public table (issue 16, item 4).
//
// A GROUP BY key that is a plain column of a public table joined to the
// private table takes its values from that table, which is public: the
// proxy reads them (KeysSQL, before the charge) and releases every one,
// as for a key with public_values, with no partition selection. Each
// private row matches at most one row of the public table (boundedJoins
// refuses any other join), so a unit still touches at most
// max_groups_per_unit groups and nothing else about the bounds changes.
// Groups of the public table without a private row appear with noised
// zeros; a row whose key is NULL (a LEFT JOIN without a match, a NULL in
// the public column) is not among the keys and is not released, and
// neither is a value that appears in the public table only after its keys
// were read.

// MaxPublicTableKeys is the most values a public table's column may have
// to serve as public group keys (and the most key combinations a query's
// public keys may make). Above it the query goes through partition
// selection as before: the number of released rows, and the work to fill
// them in, stay bounded by a number that depends on public tables only.
const MaxPublicTableKeys = 10000

// publicTableKey fills k.PublicTable and k.KeysSQL when the key is plain
// column c of a public table of the query (ref as written) that is
// joined plainly (plainlyJoined). Otherwise the key goes through
// partition selection, as any key read from the rows.
func (p *planner) publicTableKey(sel *pg_query.SelectStmt, k *GroupKey, ref *pg_query.ColumnRef, c *colRef) error {
	if c == nil || c.private || !p.joined {
		return nil
	}
	table, err := p.tableOf(ref, c)
	if err != nil {
		return nil // judged by the checks that follow, as before
	}
	r := p.publicRel(table)
	if r == nil || r.table == nil || !r.table.Public || !p.plainlyJoined(sel, table) {
		return nil
	}
	sql, err := PublicKeysSQL(r.schema, r.name, c.name)
	if err != nil {
		return err
	}
	k.PublicTable, k.KeysSQL = table, sql
	return nil
}

// selectedPublicKeys makes keys from public tables ordinary keys when
// another key is read from the private rows: the groups then go through
// partition selection anyway, and the public table need not be read.
func (p *planner) selectedPublicKeys() {
	for _, pk := range p.keys {
		if pk.key.PublicTable == "" && pk.key.PublicValues == nil {
			for i := range p.keys {
				p.keys[i].key.PublicTable, p.keys[i].key.KeysSQL = "", ""
			}
			return
		}
	}
}

// publicRel is the public relation of the query named schema.table.
func (p *planner) publicRel(table string) *relRef {
	for _, r := range p.rels {
		if r.class == relPublic && r.qualified() == table {
			return r
		}
	}
	return nil
}

// PublicKeysSQL reads the distinct non-NULL texts of column of
// schema.name (keyText: every spelling of values its type holds equal,
// as the rewritten query groups them), sorted bytewise, at most $1 of
// them: the proxy's own text, reading one public table and nothing else.
func PublicKeysSQL(schema, name, column string) (string, error) {
	var parts [3]string
	for i, s := range [3]string{schema, name, column} {
		q, err := quoteIdent(s)
		if err != nil {
			return "", err
		}
		parts[i] = q
	}
	return "SELECT DISTINCT " + keyText(parts[2]) + " FROM " + parts[0] + "." + parts[1] +
		" WHERE " + parts[2] + " IS NOT NULL ORDER BY 1 LIMIT $1::bigint", nil
}

// plainlyJoined reports whether every value of the public table's columns
// is a key the query could return: the table is on no nullable side of an
// outer join (there, private rows without a match form a NULL group, which
// is not among the table's values), and no condition filters its rows
// (WHERE or ON, after inlining: a CTE's or derived table's WHERE is there
// too) except equalities of one of its columns with a column of another
// relation, which is how it is joined. Under a filter such as
// p.category = 'audio' the query could never return the other categories,
// and releasing them with noised zeros would answer another question.
func (p *planner) plainlyJoined(sel *pg_query.SelectStmt, table string) bool {
	ok := true
	var visit func(n *pg_query.Node, nullable bool)
	visit = func(n *pg_query.Node, nullable bool) {
		switch x := n.GetNode().(type) {
		case *pg_query.Node_RangeVar:
			if r := p.rels[x.RangeVar]; r != nil && r.qualified() == table && nullable {
				ok = false
			}
		case *pg_query.Node_JoinExpr:
			ln, rn := nullable, nullable
			switch x.JoinExpr.Jointype {
			case pg_query.JoinType_JOIN_LEFT:
				rn = true
			case pg_query.JoinType_JOIN_RIGHT:
				ln = true
			case pg_query.JoinType_JOIN_INNER:
			default:
				ln, rn = true, true
			}
			visit(x.JoinExpr.Larg, ln)
			visit(x.JoinExpr.Rarg, rn)
		}
	}
	for _, it := range sel.FromClause {
		visit(it, false)
	}
	if !ok {
		return false
	}
	conds := conjuncts(sel.WhereClause)
	for _, q := range p.quals {
		conds = append(conds, conjuncts(q)...)
	}
	for _, c := range conds {
		if !p.mentionsTable(c, table) {
			continue
		}
		l, r, eq := equality(c)
		if !eq {
			return false
		}
		lt, rt := p.columnTable(l), p.columnTable(r)
		if lt == "" || rt == "" || (lt == table) == (rt == table) {
			return false
		}
	}
	return true
}

// columnTable is the relation (schema.table) of n when n is a plain
// column reference, else "".
func (p *planner) columnTable(n *pg_query.Node) string {
	ref := n.GetColumnRef()
	if ref == nil {
		return ""
	}
	c, err := p.column(ref)
	if err != nil {
		return ""
	}
	t, err := p.tableOf(ref, c)
	if err != nil {
		return ""
	}
	return t
}

// mentionsTable reports whether n reads a column of table (or one that
// cannot be resolved, to be safe).
func (p *planner) mentionsTable(n *pg_query.Node, table string) bool {
	found := false
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if ref, ok := m.Interface().(*pg_query.ColumnRef); ok {
			node := &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: ref}}
			if t := p.columnTable(node); t == "" || t == table {
				found = true
			}
		}
		return !found
	})
	return found
}
