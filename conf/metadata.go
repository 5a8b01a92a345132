package conf

import (
	"strconv"
	"strings"
)

// Public metadata about contribution bounds, written by `dpproxy bounds
// -write` (or by hand) and stated by the NOTICE and EXPLAIN DP. It is a
// measurement the operator made once, with DP (its ε is recorded in the
// ledger) or exactly (unprotected, labelled so); the proxy never computes
// a bias per query.

// Bias methods accepted in bias.measured.
const (
	BiasDP    = "dp"
	BiasExact = "exact"
)

// TableBias is what bounding a table's rows and groups is known to drop.
type TableBias struct {
	// Measured is how: "dp" (with Epsilon of the operator's budget) or
	// "exact" (no noise: the figures themselves are unprotected).
	Measured string  `yaml:"measured"`
	Epsilon  float64 `yaml:"epsilon"`
	// At is when, free text (a date).
	At string `yaml:"at"`
	// MaxRowsPerUnit is the bound RowsDropped was measured for; it must
	// equal the table's max_rows_per_unit (else the figure is stale).
	MaxRowsPerUnit int64 `yaml:"max_rows_per_unit"`
	// RowsDropped is the share of rows, in [0, 1], beyond max_rows_per_unit
	// per unit (a query without GROUP BY).
	RowsDropped *float64 `yaml:"rows_dropped"`
	// MaxGroupsPerUnit is the bound GroupsDropped was measured for.
	MaxGroupsPerUnit int64 `yaml:"max_groups_per_unit"`
	// GroupsDropped is, per grouping column (with public values, or any
	// column measured with dpproxy bounds -group-by), the share of
	// (unit, group) pairs beyond max_groups_per_unit.
	GroupsDropped map[string]float64 `yaml:"groups_dropped"`
}

// ColumnBias is what clamping a column is known to change.
type ColumnBias struct {
	// Lower and Upper are the bounds SumClamped was measured for; they
	// must equal the column's.
	Lower *float64 `yaml:"lower"`
	Upper *float64 `yaml:"upper"`
	// SumClamped is the share of the sum of absolute values, in [0, 1],
	// that clamping to [Lower, Upper] changes.
	SumClamped *float64 `yaml:"sum_clamped"`
}

func validShare(f float64) bool { return f >= 0 && f <= 1 }

// validateTableBias checks t.Bias against t's bounds; cols are t's
// columns, lower-cased.
func validateTableBias(p *problems, key string, t *Table) {
	b := t.Bias
	if b == nil {
		return
	}
	key += ".bias"
	switch b.Measured {
	case BiasDP:
		if !ValidEpsilon(b.Epsilon) {
			p.add(key+".epsilon", "must be a finite number > 0 when measured is dp, got %v", b.Epsilon)
		}
	case BiasExact:
		if b.Epsilon != 0 {
			p.add(key+".epsilon", "an exact measurement spends no ε: remove it")
		}
	default:
		p.add(key+".measured", "%q is not one of dp, exact", b.Measured)
	}
	if b.RowsDropped != nil {
		if !validShare(*b.RowsDropped) {
			p.add(key+".rows_dropped", "must lie in [0, 1], got %v", *b.RowsDropped)
		}
		if b.MaxRowsPerUnit != t.MaxRowsPerUnit {
			p.add(key+".max_rows_per_unit", "rows_dropped was measured for %d but the table has max_rows_per_unit %d: stale; measure again (dpproxy bounds)", b.MaxRowsPerUnit, t.MaxRowsPerUnit)
		}
	}
	if len(b.GroupsDropped) > 0 && b.MaxGroupsPerUnit != t.MaxGroupsPerUnit {
		p.add(key+".max_groups_per_unit", "groups_dropped was measured for %d but the table has max_groups_per_unit %d: stale; measure again (dpproxy bounds)", b.MaxGroupsPerUnit, t.MaxGroupsPerUnit)
	}
	lower := make(map[string]float64, len(b.GroupsDropped))
	for c, v := range b.GroupsDropped {
		lc := strings.ToLower(c)
		if !isIdent(c) || lc == strings.ToLower(t.PrivacyUnit) {
			p.add(key+".groups_dropped."+c, "not a column name other than the privacy unit")
		}
		if !validShare(v) {
			p.add(key+".groups_dropped."+c, "must lie in [0, 1], got %v", v)
		}
		lower[lc] = v
	}
	if b.GroupsDropped != nil {
		b.GroupsDropped = lower
	}
}

func validateColumnBias(p *problems, key string, col *Column) {
	b := col.Bias
	if b == nil {
		return
	}
	key += ".bias"
	if !col.HasBounds() {
		p.add(key, "only a column with lower and upper has a clamping bias")
		return
	}
	if b.SumClamped == nil {
		p.add(key+".sum_clamped", "missing")
	} else if !validShare(*b.SumClamped) {
		p.add(key+".sum_clamped", "must lie in [0, 1], got %v", *b.SumClamped)
	}
	if b.Lower == nil || b.Upper == nil || *b.Lower != *col.Lower || *b.Upper != *col.Upper {
		p.add(key, "measured for bounds %s but the column has [%v, %v]: stale; measure again (dpproxy bounds)", boundsText(b.Lower, b.Upper), *col.Lower, *col.Upper)
	}
}

func boundsText(lo, hi *float64) string {
	f := func(x *float64) string {
		if x == nil {
			return "?"
		}
		return strconv.FormatFloat(*x, 'g', -1, 64)
	}
	return "[" + f(lo) + ", " + f(hi) + "]"
}
