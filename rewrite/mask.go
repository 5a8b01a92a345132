package rewrite

import (
	"fmt"
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Column is one column of a catalog relation as the upstream has it.
type Column struct {
	Name string
	// Type is the column's type as format_type prints it ("bigint",
	// "timestamp with time zone"); a masked column is a constant of it.
	Type string
}

// CatalogColumnsSQL reads, from the upstream, the columns of the catalog
// relations that pass-through queries see masked ($1 is MaskedCatalogs()),
// one row per column: relation, column, type, in column order. The proxy
// runs it once at start and passes the result as Options.CatalogColumns.
const CatalogColumnsSQL = `SELECT c.relname::text, a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relname = ANY($1::text[])
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum`

// Catalog relations that count rows or hold settings are masked rather
// than refused, so that clients listing tables (DBeaver selects c.* from
// pg_class, Metabase reads n_live_tup from pg_stat_user_tables) or reading
// their settings from pg_settings work unchanged. A pass-through query
// reads each of them through a subquery with the same columns in the same
// order, in which every column that could count rows, pages, scans, tuples
// or maintenance events, or hold a setting or a server path, is a
// constant, and which returns only the rows a client may see. Which
// relations, columns and rows: maskedRelations in allowlists.go. A column
// not kept there is masked (NULL), so one added by a later PostgreSQL
// version stays hidden until it is reviewed.

// PostgreSQL 15's column lists, used when Options.CatalogColumns has none
// for a relation (unit tests, an upstream that could not be asked).
const (
	pg15Class = "oid oid, relname name, relnamespace oid, reltype oid, reloftype oid, relowner oid, relam oid, " +
		"relfilenode oid, reltablespace oid, relpages integer, reltuples real, relallvisible integer, " +
		"reltoastrelid oid, relhasindex boolean, relisshared boolean, relpersistence \"char\", relkind \"char\", " +
		"relnatts smallint, relchecks smallint, relhasrules boolean, relhastriggers boolean, " +
		"relhassubclass boolean, relrowsecurity boolean, relforcerowsecurity boolean, relispopulated boolean, " +
		"relreplident \"char\", relispartition boolean, relrewrite oid, relfrozenxid xid, relminmxid xid, " +
		"relacl aclitem[], reloptions text[], relpartbound pg_node_tree"
	pg15XactTables = "relid oid, schemaname name, relname name, seq_scan bigint, seq_tup_read bigint, " +
		"idx_scan bigint, idx_tup_fetch bigint, n_tup_ins bigint, n_tup_upd bigint, n_tup_del bigint, " +
		"n_tup_hot_upd bigint"
	pg15Tables = pg15XactTables + ", n_live_tup bigint, n_dead_tup bigint, n_mod_since_analyze bigint, " +
		"n_ins_since_vacuum bigint, last_vacuum timestamp with time zone, last_autovacuum timestamp with time zone, " +
		"last_analyze timestamp with time zone, last_autoanalyze timestamp with time zone, vacuum_count bigint, " +
		"autovacuum_count bigint, analyze_count bigint, autoanalyze_count bigint"
	pg15IOTables = "relid oid, schemaname name, relname name, heap_blks_read bigint, heap_blks_hit bigint, " +
		"idx_blks_read bigint, idx_blks_hit bigint, toast_blks_read bigint, toast_blks_hit bigint, " +
		"tidx_blks_read bigint, tidx_blks_hit bigint"
	pg15Indexes = "relid oid, indexrelid oid, schemaname name, relname name, indexrelname name, " +
		"idx_scan bigint, idx_tup_read bigint, idx_tup_fetch bigint"
	pg15IOIndexes = "relid oid, indexrelid oid, schemaname name, relname name, indexrelname name, " +
		"idx_blks_read bigint, idx_blks_hit bigint"
	pg15IOSequences = "relid oid, schemaname name, relname name, blks_read bigint, blks_hit bigint"
	pg15Settings    = "name text, setting text, unit text, category text, short_desc text, extra_desc text, " +
		"context text, vartype text, source text, min_val text, max_val text, enumvals text[], boot_val text, " +
		"reset_val text, sourcefile text, sourceline integer, pending_restart boolean"
	pg15Roles = "rolname name, rolsuper boolean, rolinherit boolean, rolcreaterole boolean, rolcreatedb boolean, " +
		"rolcanlogin boolean, rolreplication boolean, rolconnlimit integer, rolpassword text, " +
		"rolvaliduntil timestamp with time zone, rolbypassrls boolean, rolconfig text[], oid oid"
	pg15User = "usename name, usesysid oid, usecreatedb boolean, usesuper boolean, userepl boolean, " +
		"usebypassrls boolean, passwd text, valuntil timestamp with time zone, useconfig text[]"
)

// pg15Columns maps each masked relation of pg_catalog (maskedRelations)
// to its PostgreSQL 15 column list.
var pg15Columns = func() map[string]string {
	m := map[string]string{"pg_class": pg15Class, "pg_settings": pg15Settings, "pg_roles": pg15Roles, "pg_user": pg15User}
	for _, scope := range []string{"all", "user", "sys"} {
		m["pg_stat_"+scope+"_tables"] = pg15Tables
		m["pg_stat_xact_"+scope+"_tables"] = pg15XactTables
		m["pg_statio_"+scope+"_tables"] = pg15IOTables
		m["pg_stat_"+scope+"_indexes"] = pg15Indexes
		m["pg_statio_"+scope+"_indexes"] = pg15IOIndexes
		m["pg_statio_"+scope+"_sequences"] = pg15IOSequences
	}
	return m
}()

// MaskedCatalogs returns the names of the pg_catalog relations that
// pass-through queries see masked, sorted.
func MaskedCatalogs() []string {
	out := make([]string, 0, len(maskedRelations))
	for name := range maskedRelations {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// parseColumns reads a list "name type, name type, ...".
func parseColumns(spec string) []Column {
	var cols []Column
	for _, item := range strings.Split(spec, ", ") {
		name, typ, _ := strings.Cut(item, " ")
		cols = append(cols, Column{Name: name, Type: typ})
	}
	return cols
}

// catalogMask is the subquery a masked relation is read through.
type catalogMask struct {
	sel  *pg_query.Node // SelectStmt
	text string         // its deparse: a query that already holds it is left as it is
}

// buildMasks builds the subquery of every masked relation from the
// upstream's column lists, falling back to PostgreSQL 15's for a relation
// the upstream did not describe or whose list does not make a valid query.
func buildMasks(upstream map[string][]Column) map[string]*catalogMask {
	masks := make(map[string]*catalogMask, len(maskedRelations))
	for name := range maskedRelations {
		if cols := upstream[name]; len(cols) > 0 {
			if m, err := newMask(name, cols); err == nil {
				masks[name] = m
				continue
			}
		}
		m, err := newMask(name, parseColumns(pg15Columns[name]))
		if err != nil {
			panic(fmt.Sprintf("rewrite: mask of %s: %v", name, err))
		}
		masks[name] = m
	}
	return masks
}

// newMask builds SELECT col, ..., CAST(v AS type) AS col, ... FROM
// pg_catalog.name [WHERE rows] for one relation.
func newMask(name string, cols []Column) (*catalogMask, error) {
	p := maskedRelations[name]
	if p == nil {
		return nil, fmt.Errorf("%s is not a masked relation", name)
	}
	rel, err := quoteIdent(name)
	if err != nil {
		return nil, err
	}
	items := make([]string, 0, len(cols))
	for _, c := range cols {
		if c.Name == "" || c.Type == "" {
			return nil, fmt.Errorf("column %q of type %q", c.Name, c.Type)
		}
		q, err := quoteIdent(c.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case p.keep[c.Name]:
			items = append(items, q)
		case p.consts[c.Name] != "":
			items = append(items, fmt.Sprintf("CAST(%s AS %s) AS %s", p.consts[c.Name], c.Type, q))
		default:
			items = append(items, fmt.Sprintf("CAST(NULL AS %s) AS %s", c.Type, q))
		}
	}
	sql := "SELECT " + strings.Join(items, ", ") + " FROM pg_catalog." + rel
	if p.rows != "" {
		sql += " WHERE " + p.rows
	}
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return nil, err
	}
	if len(tree.Stmts) != 1 {
		return nil, fmt.Errorf("%d statements", len(tree.Stmts))
	}
	sel := tree.Stmts[0].Stmt
	s := sel.GetSelectStmt()
	if s == nil || len(s.TargetList) != len(cols) || len(s.FromClause) != 1 || (s.WhereClause != nil) != (p.rows != "") {
		return nil, fmt.Errorf("not a plain SELECT of %d columns", len(cols))
	}
	if rv := s.FromClause[0].GetRangeVar(); rv == nil || rv.Schemaname != "pg_catalog" || rv.Relname != name {
		return nil, fmt.Errorf("does not read pg_catalog.%s", name)
	}
	// Each column is itself or a constant of its type, under its name.
	for i, n := range s.TargetList {
		rt := n.GetResTarget()
		if c := rt.GetVal().GetColumnRef(); c != nil {
			if len(c.Fields) != 1 || c.Fields[0].GetString_().GetSval() != cols[i].Name || rt.Name != "" {
				return nil, fmt.Errorf("column %d is not %s", i+1, cols[i].Name)
			}
			continue
		}
		if tc := rt.GetVal().GetTypeCast(); tc == nil || tc.Arg.GetAConst() == nil || rt.Name != cols[i].Name {
			return nil, fmt.Errorf("column %d is not a constant named %s", i+1, cols[i].Name)
		}
	}
	text, err := deparseStmt(sel)
	if err != nil {
		return nil, err
	}
	return &catalogMask{sel: sel, text: text}, nil
}

// isMask reports whether a subquery is exactly the mask of a relation, as
// a previous rewrite printed it: it is left unchanged, so that rewriting a
// pass-through query twice gives what rewriting it once gave.
func (a *Analyzer) isMask(sub *pg_query.Node) bool {
	s := sub.GetSelectStmt()
	if s == nil || len(s.FromClause) != 1 {
		return false
	}
	rv := s.FromClause[0].GetRangeVar()
	if rv == nil || rv.Schemaname != "pg_catalog" || a.masks[rv.Relname] == nil {
		return false
	}
	text, err := deparseStmt(sub)
	return err == nil && text == a.masks[rv.Relname].text
}

// maskCatalogs replaces, in a pass-through query whose relations are all
// schema-qualified, every reference to a masked relation by its mask
// subquery under the name the query used (pg_class c becomes (SELECT ...)
// c, pg_catalog.pg_class becomes (SELECT ...) pg_class), so c.*, whole-row
// references, NATURAL and USING joins and named columns all read masked
// values. Column references qualified with the schema
// (pg_catalog.pg_class.relname) lose the schema, which a subquery cannot
// have. It then checks that no masked relation is read other than through
// its mask.
func (a *Analyzer) maskCatalogs(n *pg_query.Node) error {
	var err error
	masked := map[*pg_query.RangeSubselect]bool{} // the masks this walk inserted or found
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg_query.RangeSubselect:
			if a.isMask(x.Subquery) {
				masked[x] = true
				return false
			}
		case *pg_query.RangeTableSample:
			if rv := x.Relation.GetRangeVar(); rv != nil && rv.Schemaname == "pg_catalog" && a.masks[rv.Relname] != nil {
				err = reject(pgerr.InsufficientPrivilege, rv.Location, "TABLESAMPLE of %s is refused: it is read through a subquery that masks its row counts, which cannot be sampled", rv.Relname)
			}
		case *pg_query.Node:
			rv := x.GetRangeVar()
			if rv == nil || rv.Schemaname != "pg_catalog" || a.masks[rv.Relname] == nil {
				return true
			}
			alias := &pg_query.Alias{Aliasname: rv.Relname}
			if rv.Alias != nil {
				alias = proto.Clone(rv.Alias).(*pg_query.Alias)
			}
			sub := &pg_query.RangeSubselect{Subquery: proto.Clone(a.masks[rv.Relname].sel).(*pg_query.Node), Alias: alias}
			masked[sub] = true
			x.Node = &pg_query.Node_RangeSubselect{RangeSubselect: sub}
			return false
		case *pg_query.ColumnRef:
			// pg_catalog.pg_class.relname, pg_catalog.pg_class.*
			if f := x.Fields; len(f) >= 3 {
				k := len(f) - 2
				if f[k-1].GetString_().GetSval() == "pg_catalog" && a.masks[f[k].GetString_().GetSval()] != nil {
					x.Fields = f[k:]
				}
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	// Whatever the walk above missed (a RangeVar somewhere else than in
	// a FROM list) is refused rather than sent unmasked.
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg_query.RangeSubselect:
			return !masked[x]
		case *pg_query.RangeVar:
			if x.Schemaname == "pg_catalog" && a.masks[x.Relname] != nil && err == nil {
				err = reject(pgerr.InsufficientPrivilege, x.Location, "reading %s is refused here: its row counts cannot be masked in this position", x.Relname)
			}
		}
		return err == nil
	})
	return err
}

// maskPolicy says how a masked relation is read (mask.go): through a
// subquery with the relation's columns in the same order, where the
// columns in keep are themselves, those in consts a constant, every other
// one NULL (a column a later PostgreSQL adds is NULL until reviewed), and
// only the rows that meet rows ("" for all).
type maskPolicy struct {
	keep   map[string]bool
	consts map[string]string
	rows   string // an SQL condition on the relation's columns
}

// quotedNames lists a set's names as SQL string literals, sorted. The
// names are constants of allowlists.go made of letters and _ only
// (TestReadSettingsMasked).
func quotedNames(set map[string]bool) string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, "'"+n+"'")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
