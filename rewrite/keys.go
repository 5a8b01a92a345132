package rewrite

import (
	"fmt"
	"math"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Phase keys: the GROUP BY keys, and the bound on how many groups one
// unit can touch that they imply.

// groupBounds sets MaxGroups and PartitionSelection (docs/design.md, Sensitivity).
func (p *planner) groupBounds(plan *Plan) {
	// combos is the number of public key combinations, 0 when a key has
	// none (its values are read from the private table).
	combos := int64(1)
	for _, pk := range p.keys {
		n := int64(len(pk.key.PublicValues))
		if pk.key.PublicTable != "" {
			// Its values are read when the query runs: no smaller bound
			// than max_groups_per_unit is known here.
			n = math.MaxInt64
		} else if pk.key.PublicValues == nil {
			plan.PartitionSelection = true
			combos = 0
			break
		}
		if combos > math.MaxInt64/n {
			combos = math.MaxInt64
		} else {
			combos *= n
		}
	}
	plan.MaxGroups = sensitivity.MaxGroups(len(p.keys) > 0, p.table.MaxGroupsPerUnit, combos)
}

func (p *planner) groupBy(sel *pg_query.SelectStmt) error {
	for _, g := range sel.GroupClause {
		node := g
		switch x := g.Node.(type) {
		case *pg_query.Node_AConst:
			pos, ok := intConst(x.AConst)
			if !ok {
				return reject(pgerr.FeatureNotSupported, x.AConst.Location, "GROUP BY accepts expressions or output positions only")
			}
			if pos < 1 || pos > int64(len(sel.TargetList)) {
				return reject(pgerr.InvalidColumnReference, x.AConst.Location, "GROUP BY position %d is not in select list", pos)
			}
			node = sel.TargetList[pos-1].GetResTarget().GetVal()
			if fc := node.GetFuncCall(); fc != nil && isAggregate(fc) {
				return reject(pgerr.FeatureNotSupported, x.AConst.Location, "GROUP BY %d refers to an aggregate", pos)
			}
		case *pg_query.Node_GroupingSet:
			return reject(pgerr.FeatureNotSupported, x.GroupingSet.Location, "GROUPING SETS, ROLLUP and CUBE are not supported on private tables")
		case *pg_query.Node_ColumnRef:
			alias, err := p.outputAlias(x.ColumnRef, sel)
			if err != nil {
				return err
			}
			if alias != nil {
				node = alias
			}
		}
		if p.keyFor(node) >= 0 {
			continue
		}
		k := GroupKey{}
		var cr *colRef
		if ref := node.GetColumnRef(); ref != nil {
			c, err := p.column(ref)
			if err != nil {
				return err
			}
			if c.private && c.name == p.table.PrivacyUnit {
				return reject(pgerr.InsufficientPrivilege, ref.Location, "GROUP BY %s is refused: grouping by the privacy unit would release per-person values", c.name)
			}
			cr = c
			k.Column = c.name
			if col := p.table.Columns[c.name]; c.private && col != nil && col.PublicValues != nil {
				k.PublicValues = col.PublicValues
				if typ, err := p.columnType(ref, c); err == nil && typ == "bool" {
					if k.PublicValues, err = boolPublicValues(c.name, col.PublicValues); err != nil {
						return reject(pgerr.InvalidParameterValue, ref.Location, "%v", err)
					}
				}
			}
			if err := p.publicTableKey(sel, &k, ref, c); err != nil {
				return err
			}
		}
		out, _, err := p.value(node, true)
		if err != nil {
			return err
		}
		if p.mentionsUnit(node) && cr == nil {
			return reject(pgerr.InsufficientPrivilege, -1, "GROUP BY %s is refused: an expression of the privacy unit %s could release per-person values", describe(node), p.table.PrivacyUnit)
		}
		p.keys = append(p.keys, plannedKey{key: k, node: node, sql: out, col: cr})
	}
	p.selectedPublicKeys() // publickeys.go
	return nil
}

// mentionsUnit reports whether n reads the privacy unit column.
func (p *planner) mentionsUnit(n *pg_query.Node) bool {
	found := false
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if c, ok := m.Interface().(*pg_query.ColumnRef); ok {
			if r, err := p.column(c); err == nil && r.private && r.name == p.table.PrivacyUnit {
				found = true
			}
		}
		return !found
	})
	return found
}

// keyFor returns the index of the GROUP BY key that n is, or -1: the same
// column (however qualified) or the same expression.
func (p *planner) keyFor(n *pg_query.Node) int {
	if ref := n.GetColumnRef(); ref != nil {
		c, err := p.column(ref)
		if err != nil {
			return -1
		}
		for i, pk := range p.keys {
			if k := pk.col; k != nil && k.name == c.name && k.private == c.private {
				return i
			}
		}
		return -1
	}
	for i, k := range p.keys {
		if sameTree(k.node, n) {
			return i
		}
	}
	return -1
}

// outputAlias resolves GROUP BY name as PostgreSQL does
// (findTargetlistEntrySQL92): a bare name that is a column of the FROM
// clause is that column, even when an output has the same name; otherwise
// it is the output of that name (GROUP BY m for SELECT date_trunc(...) AS
// m), refused when several outputs of different values have it. Returns
// nil when ref is not an output alias.
func (p *planner) outputAlias(ref *pg_query.ColumnRef, sel *pg_query.SelectStmt) (*pg_query.Node, error) {
	if len(ref.Fields) != 1 || ref.Fields[0].GetString_() == nil {
		return nil, nil
	}
	name := ref.Fields[0].GetString_().GetSval()
	if p.inputColumn(name) {
		return nil, nil
	}
	var found *pg_query.Node
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Name != name {
			continue
		}
		if found != nil && !sameTree(found, rt.Val) {
			return nil, reject(pgerr.AmbiguousColumn, ref.Location, "GROUP BY \"%s\" is ambiguous", name)
		}
		found = rt.Val
	}
	if found != nil {
		if fc := found.GetFuncCall(); fc != nil && isAggregate(fc) {
			return nil, reject(pgerr.FeatureNotSupported, ref.Location, "GROUP BY %s refers to an aggregate", name)
		}
	}
	return found, nil
}

// inputColumn reports whether name is a column of a relation of the FROM
// clause (the private table or a joined public one), as the upstream has
// it; without the upstream's columns, whether it is a configured column.
func (p *planner) inputColumn(name string) bool {
	if name == p.table.PrivacyUnit || p.table.Columns[name] != nil {
		return true
	}
	if p.a.opts.ColumnTypes != nil {
		if _, ok := p.a.opts.ColumnTypes[p.table.QualifiedName()+"."+name]; ok {
			return true
		}
	}
	if rel := p.a.opts.Relations[p.table.QualifiedName()]; rel != nil && rel.Columns[name] != "" {
		return true
	}
	for _, r := range p.rels {
		if r.class != relPublic {
			continue
		}
		if rel := p.a.opts.Relations[r.schema+"."+r.name]; rel != nil && rel.Columns[name] != "" {
			return true
		}
	}
	return false
}

// boolPublicValues spells a boolean column's public values as PostgreSQL
// prints booleans, "t" and "f", the text the released keys are matched
// against; the configuration may use any spelling PostgreSQL reads as a
// boolean (true, yes, on, 1, ... in any case). Each value once, true first.
func boolPublicValues(column string, vals []string) ([]string, error) {
	var t, f bool
	for _, v := range vals {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "t", "true", "y", "yes", "on", "1":
			t = true
		case "f", "false", "n", "no", "off", "0":
			f = true
		default:
			return nil, fmt.Errorf("public_values of the boolean column %s: %q is not a boolean (true, false, t, f, yes, no, on, off, 1, 0)", column, v)
		}
	}
	out := []string{}
	if t {
		out = append(out, "t")
	}
	if f {
		out = append(out, "f")
	}
	return out, nil
}
