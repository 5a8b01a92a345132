package dp

import (
	"crypto/rand"
	"io"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Spec is everything needed to noise a plan's result, computed before the
// charge so that a bad parameter fails without charging: every noised
// part with its sensitivity and share of the budget, the partition
// selection's threshold, and one Aggregator per aggregate of the plan.
type Spec struct {
	plan    *rewrite.Plan
	privacy Privacy
	mech    noise.Mechanism
	total   sensitivity.Share
	aggs    []Aggregator // by index in plan.Aggregates
	sel     *selection   // nil when every group key is public (or none)
	rnd     io.Reader    // the exponential mechanism's and the optimal selection's randomness
}

// NewSpec splits the query's budget among the plan's aggregates and its
// partition selection and builds them. Each noised part is checked as it
// is built, in the order selection, then aggregates in the plan's order:
// a Spec is returned only when every part (Parts) is one the sampler
// accepts.
func NewSpec(plan *rewrite.Plan, p Privacy) (*Spec, error) {
	pure, derived := 0, 0
	kinds := make([]kindInfo, len(plan.Aggregates))
	for i, a := range plan.Aggregates {
		if a.Derived() {
			derived++ // derived.go: post-processing, no share
			continue
		}
		k, ok := registry[a.Kind]
		if !ok {
			return nil, internal("unknown aggregate kind %d", a.Kind)
		}
		if k.pure {
			pure++
		}
		kinds[i] = k
	}
	gaussian := p.gaussian()
	perAgg, sel, total := sensitivity.SplitWith(p.epsilon, p.delta, len(plan.Aggregates)-derived, pure, plan.PartitionSelection, gaussian)
	s := &Spec{plan: plan, privacy: p, mech: p.mech, total: total, rnd: rand.Reader}
	l0 := plan.MaxGroups
	if plan.PartitionSelection {
		var err error
		if s.sel, err = newSelection(s.mech, l0, sel, gaussian); err != nil {
			return nil, err
		}
	}
	params := Params{L0: l0, MaxRows: plan.MaxRows, Share: perAgg, Mech: s.mech}
	s.aggs = make([]Aggregator, len(plan.Aggregates))
	for i, a := range plan.Aggregates {
		if a.Derived() {
			continue
		}
		ag, err := kinds[i].new(a, params)
		if err != nil {
			return nil, err
		}
		s.aggs[i] = ag
	}
	for i, a := range plan.Aggregates {
		if a.Derived() {
			ag, err := s.newDerived(a)
			if err != nil {
				return nil, err
			}
			s.aggs[i] = ag
		}
	}
	return s, nil
}

// Plan is the plan the spec releases.
func (s *Spec) Plan() *rewrite.Plan { return s.plan }

// Mechanism is the sampler of the release.
func (s *Spec) Mechanism() noise.Mechanism { return s.mech }

// Total is the (ε, δ) the release costs under basic composition.
func (s *Spec) Total() sensitivity.Share { return s.total }

// Threshold is partition selection's threshold on the noisy unit count
// (for the optimal pre-aggregated selection, the number of units from
// which every group is released), and whether the plan selects
// partitions.
func (s *Spec) Threshold() (float64, bool) {
	if s.sel == nil {
		return 0, false
	}
	if s.sel.method == selOptimal {
		return s.sel.hard, true
	}
	return s.sel.threshold, true
}

// Parts are every noised part of the release, checked by NewSpec: the
// selection's unit count first (when it thresholds a noisy count), then
// each aggregate's.
func (s *Spec) Parts() []Part {
	var parts []Part
	if s.sel != nil && s.sel.method == selThreshold {
		parts = append(parts, s.sel.units)
	}
	for _, a := range s.aggs {
		parts = append(parts, a.Parts()...)
	}
	return parts
}

// aggregator is the Aggregator of one of the plan's aggregates.
func (s *Spec) aggregator(agg *rewrite.Aggregate) Aggregator {
	return s.aggs[aggIndex(s.plan, agg)]
}

func aggIndex(plan *rewrite.Plan, agg *rewrite.Aggregate) int {
	for i, a := range plan.Aggregates {
		if a == agg {
			return i
		}
	}
	return 0
}

// ReadsNoRow reports whether no private row can influence the release:
// no aggregate and no partition selection, so the answer is every
// combination of the keys' configured public values (SELECT DISTINCT or
// GROUP BY of public-valued keys only). Such a plan costs nothing, and
// the proxy releases it without reading the table or charging.
func (s *Spec) ReadsNoRow() bool {
	return len(s.plan.Aggregates) == 0 && !s.plan.PartitionSelection
}
