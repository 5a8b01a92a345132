package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Phase scope: which relations the FROM clause joins (the private table,
// public tables only) and which relation and column each column
// reference names, with its type.

// colRef is a resolved column reference.
type colRef struct {
	name    string
	private bool // a column of the private table (else of a public table)
}

func (p *planner) noSystemColumns(sel *pg_query.SelectStmt) error {
	var err error
	walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		if c, ok := m.Interface().(*pg_query.ColumnRef); ok && len(c.Fields) > 0 {
			if name := c.Fields[len(c.Fields)-1].GetString_().GetSval(); systemColumns[name] {
				err = reject(pgerr.InsufficientPrivilege, c.Location, "system column %s is refused on private table %s: it identifies individual rows", name, p.table.QualifiedName())
			}
		}
		return err == nil
	})
	return err
}

// scope starts the planner of the flattened statement sel (orig as
// written): it resolves sel's relations and checks its FROM clause, where
// the private table priv must be, and every relation with it.
func (a *Analyzer) scope(orig, sel *pg_query.SelectStmt, priv *relRef) (*planner, error) {
	name := priv.qualified()
	frefs := collectRels(sel.ProtoReflect())
	if err := a.resolve(frefs); err != nil {
		return nil, err
	}
	p := &planner{a: a, pubs: map[string]bool{}, rels: map[*pg_query.RangeVar]*relRef{}}
	p.tot.nparams = numParams(orig)
	for _, r := range frefs {
		p.rels[r.rv] = r
	}
	if err := p.fromClause(sel.FromClause); err != nil {
		return nil, err
	}
	if p.rv == nil {
		return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "private table %s may only be read in the FROM clause of the query, possibly through derived tables or CTEs", name)
	}
	inFrom := map[*pg_query.RangeVar]bool{}
	for _, f := range sel.FromClause {
		walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
			if rv, ok := m.Interface().(*pg_query.RangeVar); ok {
				inFrom[rv] = true
			}
			return true
		})
	}
	for _, r := range frefs {
		if inFrom[r.rv] {
			continue
		}
		if r.class == relPrivate {
			return nil, reject(pgerr.FeatureNotSupported, r.rv.Location, "private table %s may only be read in the FROM clause of the query: subqueries in expressions are not supported", r.qualified())
		}
		return nil, reject(pgerr.FeatureNotSupported, r.rv.Location, "relation %s cannot be read in a subquery of a query over private table %s: join it in the FROM clause", r.qualified(), name)
	}
	return p, nil
}

// fromClause checks the FROM items: the private table, joined (inner, left
// or right, never on the nullable side) with public tables only.
func (p *planner) fromClause(items []*pg_query.Node) error {
	if len(items) > 1 {
		p.joined = true
	}
	for _, it := range items {
		if err := p.fromItem(it, false); err != nil {
			return err
		}
	}
	return nil
}

func (p *planner) fromItem(n *pg_query.Node, nullable bool) error {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_RangeVar:
		rv := x.RangeVar
		r := p.rels[rv]
		if r == nil {
			return reject(pgerr.FeatureNotSupported, rv.Location, "relation %s cannot be resolved", rv.Relname)
		}
		switch r.class {
		case relPrivate:
			if p.rv != nil {
				return reject(pgerr.FeatureNotSupported, rv.Location, "joins of two private tables (%s, %s) are not supported: each person's rows in both would have to be bounded together", p.table.QualifiedName(), r.qualified()).
					WithHint("Aggregate each private table in its own query.")
			}
			if nullable {
				return reject(pgerr.FeatureNotSupported, rv.Location, "private table %s is on the nullable side of an outer join: rows without a private match would belong to no person; use an inner join or put %s on the preserved side", r.qualified(), r.qualified())
			}
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				return reject(pgerr.FeatureNotSupported, rv.Location, "column aliases on private table %s are not supported", r.qualified())
			}
			p.table, p.rv, p.refName = r.table, rv, rv.Relname
			if rv.Alias != nil {
				p.refName = rv.Alias.Aliasname
			}
		case relPublic:
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				return reject(pgerr.FeatureNotSupported, rv.Location, "column aliases on joined table %s are not supported", r.qualified())
			}
			if rv.Alias != nil {
				p.pubs[rv.Alias.Aliasname] = true
			} else {
				p.pubs[rv.Relname] = true
				p.pubs[r.schema+"."+rv.Relname] = true
			}
		default:
			return reject(pgerr.FeatureNotSupported, rv.Location, "%s cannot be joined with a private table: only tables configured as public can", r.qualified())
		}
		return nil
	case *pg_query.Node_JoinExpr:
		j := x.JoinExpr
		p.joined = true
		if j.IsNatural {
			return reject(pgerr.FeatureNotSupported, -1, "NATURAL joins with a private table are not supported: name the join columns with ON or USING")
		}
		if j.Alias != nil || j.JoinUsingAlias != nil {
			return reject(pgerr.FeatureNotSupported, -1, "aliases on a join with a private table are not supported")
		}
		ln, rn := nullable, nullable
		switch j.Jointype {
		case pg_query.JoinType_JOIN_INNER:
		case pg_query.JoinType_JOIN_LEFT:
			rn = true
		case pg_query.JoinType_JOIN_RIGHT:
			ln = true
		default:
			return reject(pgerr.FeatureNotSupported, -1, "only inner, left and right joins are supported with a private table")
		}
		if j.Quals != nil {
			p.quals = append(p.quals, j.Quals)
		}
		if err := p.fromItem(j.Larg, ln); err != nil {
			return err
		}
		return p.fromItem(j.Rarg, rn)
	case *pg_query.Node_RangeSubselect:
		return reject(pgerr.FeatureNotSupported, -1, "a subquery over public tables cannot be joined with a private table: join the table directly")
	case *pg_query.Node_RangeFunction:
		return reject(pgerr.FeatureNotSupported, -1, "functions in FROM are not supported in a query over private table")
	}
	return reject(pgerr.FeatureNotSupported, -1, "%s is not supported in FROM with a private table", describe(n))
}

// column resolves a column reference to a column of the private table or
// of a joined public table, refusing *, whole-row references and
// references to other relations. Without joins every column is the private
// table's. With joins an unqualified name is the private table's when it
// is its privacy unit or a configured column (PostgreSQL reports it as
// ambiguous if a public table has it too), else it is taken as a public
// table's: nothing is derived from such a column but its values.
func (p *planner) column(c *pg_query.ColumnRef) (*colRef, error) {
	n := len(c.Fields)
	if n == 0 {
		return nil, reject(pgerr.FeatureNotSupported, c.Location, "empty column reference")
	}
	if c.Fields[n-1].GetAStar() != nil {
		return nil, reject(pgerr.InsufficientPrivilege, c.Location, "SELECT * would return individual rows of private table %s", p.table.QualifiedName()).
			WithHint("Select group keys and aggregates such as count(*), sum(col), avg(col).")
	}
	quals := make([]string, 0, n-1)
	for _, f := range c.Fields[:n-1] {
		quals = append(quals, f.GetString_().GetSval())
	}
	name := c.Fields[n-1].GetString_().GetSval()
	bad := func() error {
		return reject(pgerr.UndefinedColumn, c.Location, "column reference %s does not refer to table %s", strings.Join(append(quals, name), "."), p.refName)
	}
	if name == "" {
		return nil, bad()
	}
	switch len(quals) {
	case 0:
		if name == p.refName || p.pubs[name] {
			return nil, reject(pgerr.InsufficientPrivilege, c.Location, "whole-row reference %s would return individual rows of private table %s", name, p.table.QualifiedName())
		}
		if !p.joined || name == p.table.PrivacyUnit || p.table.Columns[name] != nil {
			return &colRef{name: name, private: true}, nil
		}
		return &colRef{name: name}, nil
	case 1:
		switch {
		case quals[0] == p.refName:
			return &colRef{name: name, private: true}, nil
		case p.pubs[quals[0]]:
			return &colRef{name: name}, nil
		}
	case 2:
		q := quals[0] + "." + quals[1]
		switch {
		case p.rv.Alias == nil && quals[0] == p.table.Schema && quals[1] == p.table.Name:
			return &colRef{name: name, private: true}, nil
		case p.pubs[q]:
			return &colRef{name: name}, nil
		}
	}
	return nil, bad()
}

// columnType is the type of a column reference, from Options.ColumnTypes.
func (p *planner) columnType(ref *pg_query.ColumnRef, c *colRef) (string, error) {
	types := p.a.opts.ColumnTypes
	if types == nil {
		return unknownType, nil
	}
	table, err := p.tableOf(ref, c)
	if err != nil {
		return "", err
	}
	if t, ok := types[table+"."+c.name]; ok {
		return t, nil
	}
	if !p.a.typedTables[table] {
		return "", reject(pgerr.InsufficientPrivilege, ref.Location, "dpproxy does not know the column types of table %s (it reads them when it starts; restart it after creating or changing a configured table)", table)
	}
	return "", reject(pgerr.UndefinedColumn, ref.Location, "column %s of table %s does not exist (as of when dpproxy started)", c.name, table)
}

// tableOf returns the relation (schema.table) a column reference reads.
func (p *planner) tableOf(ref *pg_query.ColumnRef, c *colRef) (string, error) {
	if c.private {
		return p.table.QualifiedName(), nil
	}
	quals := make([]string, 0, len(ref.Fields))
	for _, f := range ref.Fields[:len(ref.Fields)-1] {
		quals = append(quals, f.GetString_().GetSval())
	}
	byName := map[string]string{}
	var all []string
	for _, r := range p.rels {
		if r.class != relPublic && r.class != relPrivate {
			continue
		}
		q := r.qualified()
		all = append(all, q)
		if r.rv.Alias != nil {
			byName[r.rv.Alias.Aliasname] = q
		} else {
			byName[r.rv.Relname] = q
			byName[q] = q
		}
	}
	if len(quals) > 0 {
		if t, ok := byName[strings.Join(quals, ".")]; ok {
			return t, nil
		}
		return "", reject(pgerr.UndefinedColumn, ref.Location, "column reference %s does not refer to a table of the query", describe(&pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: ref}}))
	}
	var found []string
	seen := map[string]bool{}
	for _, t := range all {
		if _, ok := p.a.opts.ColumnTypes[t+"."+c.name]; ok && !seen[t] {
			seen[t] = true
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", reject(pgerr.UndefinedColumn, ref.Location, "column %s does not exist in the tables of the query (as of when dpproxy started)", c.name)
	}
	return "", reject(pgerr.AmbiguousColumn, ref.Location, "column reference %q is ambiguous", c.name)
}

// numericColumn reports whether a column may be clamped or computed on as
// a number: its type casts to numeric without failing.
func (p *planner) numericColumn(ref *pg_query.ColumnRef, c *colRef) bool {
	t, err := p.columnType(ref, c)
	return err == nil && (t == unknownType || isNumericFamily(t))
}
