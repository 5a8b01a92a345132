package rewrite

import (
	"math"

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
		if pk.key.PublicValues == nil {
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
