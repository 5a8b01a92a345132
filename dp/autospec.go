package dp

import (
	"fmt"
	"strings"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// AutoSpec is the release of a plan with a column whose bounds are chosen
// at query time (rewrite.Plan.Auto): the bounds part (ApproxBounds, share
// of the query's ε) and the main query's spec with the rest of ε. Main is
// built on the plan clamped to the widest bounds (±2^63), so that every
// check of NewSpec passes before the charge for any bounds chosen later
// (narrower bounds only lower the sensitivities); its cost does not
// depend on the bounds (Laplace's ρ is a function of ε, Gaussian noise
// is calibrated to its sensitivity), so the charge made before the
// bounds are known is exactly what the release consumes.
type AutoSpec struct {
	Bounds *ApproxBounds
	Main   *Spec
	main   Privacy // the main query's privacy: ε·(1 − share), δ
	total  Privacy
}

// NewAutoSpec splits p's ε: share to the bounds (noised with lap, a
// Laplace sampler), the rest to the main query, whose δ is all of p's.
func NewAutoSpec(plan *rewrite.Plan, p Privacy, share float64, lap noise.Mechanism) (*AutoSpec, error) {
	if plan.Auto == nil {
		return nil, internal("the plan has no column with bounds: auto")
	}
	if !(share > 0 && share < 1) {
		return nil, refuse("the share of ε for bounds: auto must lie strictly between 0 and 1, got %v", share)
	}
	b, err := NewApproxBounds(plan.Auto.Column, p.epsilon*share, plan.MaxGroups, plan.MaxRows, lap)
	if err != nil {
		return nil, err
	}
	pm := p
	pm.epsilon = p.epsilon - b.eps
	main, err := NewSpec(plan, pm)
	if err != nil {
		return nil, err
	}
	return &AutoSpec{Bounds: b, Main: main, main: pm, total: p}, nil
}

// Cost is the whole query's cost, charged once before the histogram
// query runs: the bounds part's and the main query's.
func (a *AutoSpec) Cost() (Cost, error) {
	c, err := a.Main.Cost()
	if err != nil {
		return Cost{}, err
	}
	return a.Bounds.AddCost(c), nil
}

// Chosen is the spec of the main query once its bounds are chosen:
// chosen is the plan with them (rewrite.Plan.WithAutoBounds).
func (a *AutoSpec) Chosen(chosen *rewrite.Plan) (*Spec, error) {
	return NewSpec(chosen, a.main)
}

// header is the first lines of EXPLAIN DP: the whole charge and its two
// parts.
func (a *AutoSpec) header() []string {
	c := a.Main.Total()
	return append([]string{fmt.Sprintf("Charge in total: ε=%s δ=%s (the session's), made once before either part runs: ε=%s for the bounds of %s, chosen at query time, then ε=%s δ=%s for the answer below",
		formatNum(a.Bounds.eps+c.Epsilon), formatNum(c.Delta), formatNum(a.Bounds.eps), a.Bounds.Column, formatNum(c.Epsilon), formatNum(c.Delta))},
		a.Bounds.Explain(a.main.epsilon)...)
}

// ExplainSpec is the release's part of EXPLAIN DP: the whole charge,
// the bounds part, then the main query's spec.
func (a *AutoSpec) ExplainSpec(names []string) []string {
	return append(a.header(), a.Main.ExplainSpec(names)...)
}

// Explain is EXPLAIN DP: ExplainSpec, the budget (b may be nil), the
// main query's plan and the histogram query.
func (a *AutoSpec) Explain(names []string, b *Budget) []string {
	lines := append(a.header(), a.Main.Explain(names, b)...)
	lines = append(lines, fmt.Sprintf("Bounds query for %s (same parameters and seed), run after the charge and before the rewritten SQL:", a.Bounds.Column))
	return append(lines, strings.Split(a.Main.plan.Auto.SQL, "\n")...)
}
