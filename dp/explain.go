package dp

import (
	"fmt"
	"math"
	"strings"
)

// The words of a release: the NOTICE after a noisy answer and the lines of
// EXPLAIN DP.

// Bounds words the 95% error bound of each noisy column, named by names
// (one per output column).
func (s *Spec) Bounds(names []string) string {
	var parts []string
	for i, o := range s.plan.Outputs {
		if o.Agg == nil {
			continue
		}
		parts = append(parts, s.aggregator(o.Agg).Bound(names[i], s.mech))
	}
	if len(parts) == 0 {
		// Keys only (SELECT DISTINCT, GROUP BY without aggregates).
		if s.plan.PartitionSelection {
			return "keys only: a key is listed when its noisy count of distinct " + s.plan.Table.PrivacyUnit + " values passes partition selection, so keys of few people are left out"
		}
		return "keys only: every configured public value is listed; no private row influences this answer"
	}
	return strings.Join(parts, ", ")
}

// NoticeText is the NOTICE after a noisy answer: each noisy column's 95%
// error bound, worded for a person, then the charge and what is left.
func NoticeText(bounds string, cached bool, eps, delta, epsLeft, deltaLeft float64) string {
	if cached {
		return fmt.Sprintf("dp: %s; repeated query: the earlier noisy answer, nothing charged", bounds)
	}
	if eps == 0 && delta == 0 {
		return fmt.Sprintf("dp: %s; nothing charged", bounds)
	}
	return fmt.Sprintf("dp: %s; charged ε=%s δ=%s, remaining ε=%s δ=%s", bounds,
		formatNum(eps), formatNum(delta), formatNum(epsLeft), formatNum(deltaLeft))
}

// Budget is what the ledger says is left, for EXPLAIN DP.
type Budget struct {
	EpsilonLeft, DeltaLeft float64
	// ZCDP is set under zCDP accounting, where what a query adds in ε
	// depends on what was spent before.
	ZCDP bool
	// Advanced is set under advanced accounting (budget/advanced.go),
	// where likewise the ε a query adds depends on what was spent before.
	Advanced bool
	// RDP is set under Rényi accounting (budget/rdp.go): likewise.
	RDP bool
}

// Explain is the text of EXPLAIN DP, one line per row: how the query would
// be answered (ExplainSpec), the budget left after it (nil when the ledger
// could not say) and what runs (ExplainPlan). names are the output
// columns' names.
func (s *Spec) Explain(names []string, b *Budget) []string {
	lines := s.ExplainSpec(names)
	if b != nil {
		lines = append(lines, s.ExplainBudget(*b)...)
	}
	return append(lines, s.ExplainPlan()...)
}

// ExplainSpec is the release's part of EXPLAIN DP: the contribution
// bounds, the ε/δ split, the total charge and each output column's
// mechanism, sensitivity, noise scale and 95% error bound, and partition
// selection's threshold.
func (s *Spec) ExplainSpec(names []string) []string {
	plan := s.plan
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }

	add("DP query over %s, privacy unit %s, mechanism %s", plan.Table.QualifiedName(), plan.Table.PrivacyUnit, s.mech.Name())
	add("Contribution bounds: at most %d rows per unit per group, at most %d group(s) per unit", plan.MaxRows, plan.MaxGroups)
	lines = append(lines, s.explainBias())
	noised := 0 // derived aggregates (derived.go) take no share
	for _, a := range plan.Aggregates {
		if !a.Derived() {
			noised++
		}
	}
	shares := noised
	if plan.PartitionSelection {
		shares++
	}
	split := fmt.Sprintf("ε split in %d equal share(s): %d aggregate(s)", shares, noised)
	if noised < len(plan.Aggregates) {
		split += fmt.Sprintf(" (%d more derived from them, free)", len(plan.Aggregates)-noised)
	}
	if plan.PartitionSelection {
		split += " and partition selection"
	}
	if shares == 0 {
		// Keys only, every one with public values: the answer is every
		// combination of the configured values whatever the rows hold.
		split = "no private row influences this answer: it is every combination of the configured public values, so nothing is charged"
	}
	add("Charge: ε=%s δ=%s (of the session's ε=%s δ=%s; %s)", formatNum(s.total.Epsilon), formatNum(s.total.Delta),
		formatNum(s.privacy.epsilon), formatNum(s.privacy.delta), split)

	for i, o := range plan.Outputs {
		name := names[i]
		if o.Agg == nil {
			k := plan.GroupKeys[o.GroupKey]
			if k.PublicTable != "" && k.PublicValues == nil {
				add("Column %s: group key from public table %s: all its values are released, even with a count near zero (read before the charge)", name, k.PublicTable)
			} else if k.PublicTable != "" {
				add("Column %s: group key from public table %s: all %d of its values are released, even with a count near zero", name, k.PublicTable, len(k.PublicValues))
			} else if len(k.PublicValues) > 0 {
				add("Column %s: group key with public values: all %d are released, even with a count near zero", name, len(k.PublicValues))
			} else {
				add("Column %s: group key read from the private table: a value is released only through partition selection", name)
			}
			continue
		}
		lines = append(lines, s.aggregator(o.Agg).Explain(name, s.mech)...)
	}
	if sel := s.sel; sel != nil {
		lines = append(lines, sel.explain())
	}
	return lines
}

// ExplainBudget is EXPLAIN DP's word on the budget: what is left after the
// query, or, under zCDP, what is left now.
func (s *Spec) ExplainBudget(b Budget) []string {
	if b.ZCDP {
		// Under zCDP the ε a query adds depends on what was spent before
		// (the conversion is not additive): plain subtraction could
		// overstate what is left, so say only what is known.
		return []string{fmt.Sprintf("Budget now (zCDP accounting): ε=%s δ=%s left; this query adds ρ to the ledger's zCDP total and its ε cost after conversion is known once it runs (SHOW dp.budget)",
			formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	}
	if b.Advanced {
		// The filter's ε grows with Σε², not Σε: as under zCDP, plain
		// subtraction would misstate what is left.
		return []string{fmt.Sprintf("Budget now (advanced accounting): ε=%s δ=%s left; this query adds ε²=%s to the filter's Σε², and what it costs in ε depends on what was spent before (SHOW dp.budget)",
			formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft), formatNum(s.total.Epsilon*s.total.Epsilon))}
	}
	if b.RDP {
		// The Rényi filter's ε is a conversion of its per-order sums:
		// not additive either.
		return []string{fmt.Sprintf("Budget now (rdp accounting): ε=%s δ=%s left; this query adds its Rényi curve to the ledger's sums, and what it costs in ε depends on what was spent before (SHOW dp.budget)",
			formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	}
	lines := []string{fmt.Sprintf("Budget left after this query: ε=%s δ=%s (now ε=%s δ=%s)",
		formatNum(math.Max(0, b.EpsilonLeft-s.total.Epsilon)), formatNum(math.Max(0, b.DeltaLeft-s.total.Delta)),
		formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	if b.EpsilonLeft < s.total.Epsilon || b.DeltaLeft < s.total.Delta {
		lines = append(lines, "Budget: this query would be refused (53400): it costs more than is left")
	}
	return lines
}

// ExplainPlan is what EXPLAIN DP says runs: the post-processing over the
// noisy rows, the constants evaluated before the charge and the rewritten
// SQL.
func (s *Spec) ExplainPlan() []string {
	plan := s.plan
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if pp := plan.Post; pp != nil {
		add("Post-processing over the noisy rows dp(dp_c0, ...): SELECT %s%s%s", pp.Targets,
			map[bool]string{true: " WHERE " + pp.Where}[pp.Where != ""], map[bool]string{true: " ORDER BY " + pp.OrderBy}[pp.OrderBy != ""])
	}
	if len(plan.Consts) > 0 {
		// Constants first (rewrite/hoist.go): evaluated before the charge.
		add("Constants evaluated before any private row is read, nothing charged if they fail:")
		for _, c := range plan.Consts {
			if c.Param == 0 {
				add("  %s (checked, stays inline)", c.SQL)
			} else {
				add("  $%d = %s", c.Param, c.SQL)
			}
		}
	}
	if s.ReadsNoRow() {
		add("Nothing reads the table: the answer is every combination of the keys' public values")
		return lines
	}
	add("Rewritten SQL ($%d is a fresh secret seed per execution):", plan.SeedParam())
	return append(lines, strings.Split(plan.SQL, "\n")...)
}
