package dp

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The bias of contribution bounding, as the NOTICE's DETAIL and EXPLAIN DP
// state it: from the table's public metadata (conf/metadata.go, written by
// dpproxy bounds), never from anything computed over the query's rows.

// BiasText is one short line for the NOTICE's DETAIL: the contribution
// bounds the query applies and the bias they are known to cause.
func (s *Spec) BiasText() string {
	return "contribution bounds: " + s.boundsApplied() + "; bias " + s.biasKnown()
}

// BiasText of a union: each branch's, once when they agree.
func (u *Union) BiasText() string {
	var parts []string
	seen := map[string]bool{}
	for i, s := range u.Specs {
		t := s.BiasText()
		if !seen[t] {
			seen[t] = true
			parts = append(parts, fmt.Sprintf("branch %d: %s", i+1, t))
		}
	}
	if len(parts) == 1 {
		return strings.TrimPrefix(parts[0], "branch 1: ")
	}
	return strings.Join(parts, " | ")
}

// explainBias is EXPLAIN DP's line on the bias.
func (s *Spec) explainBias() string {
	if b := s.biasKnown(); strings.HasPrefix(b, "(") {
		return "Bias of the contribution bounds " + b
	}
	return "Bias of the contribution bounds: " + s.biasKnown()
}

// boundsApplied words the bounds: rows per unit (per group), groups per
// unit, clamped columns.
func (s *Spec) boundsApplied() string {
	p := s.plan
	unit := p.Table.PrivacyUnit
	grouped := len(p.GroupKeys) > 0
	parts := []string{fmt.Sprintf("≤%d rows per %s", p.MaxRows, unit)}
	if grouped {
		parts[0] += " per group"
		parts = append(parts, fmt.Sprintf("≤%d group(s) per %s", p.MaxGroups, unit))
	}
	for _, a := range clampedAggs(p) {
		parts = append(parts, fmt.Sprintf("%s clamped to [%s, %s]", a.Column, num(a.Lower), num(a.Upper)))
	}
	return strings.Join(parts, ", ")
}

// clampedAggs are the aggregates over a clamped column, one per column.
func clampedAggs(p *rewrite.Plan) []*rewrite.Aggregate {
	var out []*rewrite.Aggregate
	seen := map[string]bool{}
	for _, a := range p.Aggregates {
		switch a.Kind {
		case rewrite.AggSum, rewrite.AggAvg, rewrite.AggVariance, rewrite.AggQuantile:
		default:
			continue
		}
		if a.Column == "" || seen[a.Column] {
			continue
		}
		seen[a.Column] = true
		out = append(out, a)
	}
	return out
}

// biasKnown words what the metadata says of these bounds, and what it
// does not: "(measured ...): ..." or "unknown (...)".
func (s *Spec) biasKnown() string {
	p := s.plan
	t := p.Table
	b := t.Bias
	var known, unknown []string
	grouped := len(p.GroupKeys) > 0
	if b != nil && b.RowsDropped != nil {
		if grouped {
			// Per group a unit has at most its rows in all: no more is dropped.
			known = append(known, "at most "+pctText(*b.RowsDropped)+" of the table's rows dropped by the rows bound (all groups together)")
		} else {
			known = append(known, "about "+pctText(*b.RowsDropped)+" of the table's rows dropped")
		}
	} else {
		unknown = append(unknown, "rows dropped")
	}
	if grouped {
		var shares []float64
		all := true
		for _, k := range p.GroupKeys {
			v, ok := 0.0, false
			if b != nil && k.Column != "" {
				v, ok = b.GroupsDropped[k.Column]
			}
			if !ok {
				all = false
				break
			}
			shares = append(shares, v)
		}
		if all {
			// With several keys a unit's groups are combinations of their
			// values: at least as many pairs are dropped as for the key
			// that drops most.
			m := 0.0
			for _, v := range shares {
				m = math.Max(m, v)
			}
			w := pctText(m) + " of (" + t.PrivacyUnit + ", group) pairs dropped by the groups bound"
			if len(shares) > 1 {
				w = "at least " + w
			}
			known = append(known, w)
		} else {
			unknown = append(unknown, "groups dropped")
		}
	}
	for _, a := range clampedAggs(p) {
		col := t.Columns[a.Column]
		if col != nil && col.Bias != nil && col.Bias.SumClamped != nil && col.HasBounds() && *col.Lower == a.Lower && *col.Upper == a.Upper {
			known = append(known, pctText(*col.Bias.SumClamped)+" of "+a.Column+"'s sum changed by clamping")
		} else {
			unknown = append(unknown, a.Column+" clamping")
		}
	}
	var w string
	if len(known) > 0 {
		how := "measured exactly"
		if b != nil && b.Measured == conf.BiasDP {
			how = "measured with DP, ε=" + num(b.Epsilon)
		}
		if b != nil && b.At != "" {
			how += ", " + b.At
		}
		if b != nil && b.Measured == conf.BiasDP {
			// DP histograms cannot see what a few units do (bounds/hist.go,
			// Floor): the figures may leave out a few heavy users' rows.
			how += "; blind to a few heavy users"
		}
		w = "(" + how + "): " + strings.Join(known, ", ")
		if len(unknown) > 0 {
			w += "; unknown for " + strings.Join(unknown, ", ")
		}
		return w
	}
	return "unknown (not measured: dpproxy bounds)"
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// pctText is a share as a percentage with one decimal ("<0.1%" for a
// positive share below it).
func pctText(f float64) string {
	if f > 0 && f < 0.001 {
		return "<0.1%"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}
