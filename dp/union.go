package dp

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Union is the release of a UNION ALL of DP queries (rewrite.Plan.Branches):
// one Spec per branch, each with the session's whole ε and δ (a branch is
// a query of its own, worded and bounded as it would be alone), so the
// union costs the sum of the branches' costs (basic composition; under
// zCDP the sum of their ρ and approximate δ). The proxy charges that sum
// in one charge before any branch runs.
type Union struct {
	plan  *rewrite.Plan
	Specs []*Spec // by branch
	total sensitivity.Share
}

// NewUnion is the union of the branches' specs (NewSpec of each of
// plan.Branches, in order). maxEpsilon is the operator's
// privacy.max_epsilon_per_query: a union whose total ε exceeds it is
// refused, as dp.epsilon above it is.
func NewUnion(plan *rewrite.Plan, specs []*Spec, maxEpsilon float64) (*Union, error) {
	if len(specs) != len(plan.Branches) || len(specs) == 0 {
		return nil, internal("a union of %d branches has %d specs", len(plan.Branches), len(specs))
	}
	u := &Union{plan: plan, Specs: specs}
	for _, s := range specs {
		u.total.Epsilon += s.total.Epsilon
		u.total.Delta += s.total.Delta
	}
	if u.total.Epsilon > maxEpsilon {
		e := refuse("this UNION ALL of %d DP queries would cost ε=%s in all (each branch ε=%s), more than the maximum of %s per query set by the operator (privacy.max_epsilon_per_query)",
			len(plan.Branches), formatNum(u.total.Epsilon), formatNum(specs[0].privacy.epsilon), formatNum(maxEpsilon))
		return nil, e.WithHint("SET dp.epsilon to at most %s for this query, or run the branches as separate queries.", formatNum(maxEpsilon/float64(len(plan.Branches))))
	}
	return u, nil
}

// Cost is the sum of the branches' costs.
func (u *Union) Cost() (Cost, error) {
	var c Cost
	for _, s := range u.Specs {
		bc, err := s.Cost()
		if err != nil {
			return Cost{}, err
		}
		c.Epsilon += bc.Epsilon
		c.Delta += bc.Delta
		c.Rho += bc.Rho
		c.DeltaApprox += bc.DeltaApprox
		c.Releases = append(c.Releases, bc.Releases...)
	}
	return c, nil
}

// Bounds words each branch's error bounds for the NOTICE, with the
// reason the charge is a sum. names are each branch's output names.
func (u *Union) Bounds(names [][]string) string {
	parts := []string{fmt.Sprintf("UNION ALL of %d DP queries, each answered on its own; the charge is the sum of theirs", len(u.Specs))}
	for i, s := range u.Specs {
		parts = append(parts, fmt.Sprintf("branch %d (ε=%s δ=%s): %s", i+1, formatNum(s.total.Epsilon), formatNum(s.total.Delta), s.Bounds(names[i])))
	}
	return strings.Join(parts, "; ")
}

// Explain is EXPLAIN DP of the union: the total, then each branch's spec
// and plan, then the budget left after the total.
func (u *Union) Explain(names [][]string, b *Budget) []string {
	lines := u.ExplainSpec(names)
	if b != nil {
		lines = append(lines, u.explainBudget(*b)...)
	}
	for i, s := range u.Specs {
		lines = append(lines, fmt.Sprintf("Branch %d:", i+1))
		for _, l := range s.ExplainPlan() {
			lines = append(lines, "  "+l)
		}
	}
	if pp := u.plan.Post; pp != nil {
		order := ""
		if pp.OrderBy != "" {
			order = " ORDER BY " + pp.OrderBy
		}
		lines = append(lines, fmt.Sprintf("Post-processing over the released rows of all branches, as the union's column types dp(dp_c0, ...): SELECT %s%s", pp.Targets, order))
	}
	return lines
}

// ExplainSpec is the union's part of EXPLAIN DP without the ledger.
func (u *Union) ExplainSpec(names [][]string) []string {
	lines := []string{fmt.Sprintf("UNION ALL of %d DP queries, each answered on its own, rows concatenated in order; charge: ε=%s δ=%s, the sum of the branches' charges, in one charge before any branch runs",
		len(u.Specs), formatNum(u.total.Epsilon), formatNum(u.total.Delta))}
	for i, s := range u.Specs {
		lines = append(lines, fmt.Sprintf("Branch %d:", i+1))
		for _, l := range s.ExplainSpec(names[i]) {
			lines = append(lines, "  "+l)
		}
	}
	return lines
}

func (u *Union) explainBudget(b Budget) []string {
	if b.ZCDP {
		return []string{fmt.Sprintf("Budget now (zCDP accounting): ε=%s δ=%s left; this query adds the branches' ρ to the ledger's zCDP total (SHOW dp.budget)",
			formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	}
	if b.RDP {
		return []string{fmt.Sprintf("Budget now (rdp accounting): ε=%s δ=%s left; this query adds the branches' Rényi curves to the ledger's sums (SHOW dp.budget)",
			formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	}
	lines := []string{fmt.Sprintf("Budget left after this query: ε=%s δ=%s (now ε=%s δ=%s)",
		formatNum(math.Max(0, b.EpsilonLeft-u.total.Epsilon)), formatNum(math.Max(0, b.DeltaLeft-u.total.Delta)),
		formatNum(b.EpsilonLeft), formatNum(b.DeltaLeft))}
	if b.EpsilonLeft < u.total.Epsilon || b.DeltaLeft < u.total.Delta {
		lines = append(lines, "Budget: this query would be refused (53400): it costs more than is left")
	}
	return lines
}
