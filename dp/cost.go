package dp

import (
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

// Cost is what a release costs the analyst: its (ε, δ) for basic
// composition and its zCDP cost (ρ, δ_approx), which the ledger uses under
// privacy.accounting: zcdp.
type Cost struct {
	Epsilon, Delta   float64
	Rho, DeltaApprox float64
	// Releases are the randomized parts (releases), which the ledger
	// records and the RDP accountant composes.
	Releases []budget.Release
}

// Cost is the spec's cost (see zcdpCost).
func (s *Spec) Cost() (Cost, error) {
	rho, dApprox, err := zcdpCost(s)
	if err != nil {
		return Cost{}, err
	}
	rs, err := releases(s)
	if err != nil {
		return Cost{}, err
	}
	return Cost{Epsilon: s.total.Epsilon, Delta: s.total.Delta, Rho: rho, DeltaApprox: dApprox, Releases: rs}, nil
}

// releases are the spec's randomized parts, as budget.Release (the RDP
// accountant's curves, budget/rdp.go), part for part as zcdpCost counts
// them:
//
//   - Laplace noise: L0 groups of sensitivity L∞, scale b = L0·L∞/ε
//     (noise.Laplace's calibration);
//   - Gaussian noise: L2 sensitivity √L0·L∞ and σ exactly as the sampler
//     calibrates it;
//   - a quantile: the exponential mechanism, its ε over L0 groups;
//   - partition selection by threshold: its noise as above, and its
//     threshold's δ as a selection release;
//   - the optimal pre-aggregated selection: no noise, L0 decisions each
//     (ε/L0)-DP up to δ/L0, a pure release over L0 groups, and its δ as a
//     selection release.
func releases(s *Spec) ([]budget.Release, error) {
	gaussian := s.mech.Name() == conf.Gaussian
	var out []budget.Release
	add := func(p Part) error {
		if p.Bound.LInf == 0 || p.Bound.L0 == 0 {
			return nil // not noised: nothing about any person is released
		}
		if !gaussian {
			out = append(out, budget.Release{Mechanism: budget.MechLaplace, L0: p.Bound.L0, Sensitivity: p.Bound.LInf,
				Scale: float64(p.Bound.L0) * p.Bound.LInf / p.Share.Epsilon, Epsilon: p.Share.Epsilon})
			return nil
		}
		sigma, err := s.mech.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
		if err != nil {
			return err
		}
		out = append(out, budget.Release{Mechanism: budget.MechGaussian, L0: p.Bound.L0, Sensitivity: p.Bound.L2(),
			Scale: sigma, Epsilon: p.Share.Epsilon, Delta: p.Share.Delta})
		return nil
	}
	for _, a := range s.aggs {
		for _, p := range a.Parts() {
			if err := add(p); err != nil {
				return nil, err
			}
		}
		if q, ok := a.(*quantile); ok {
			out = append(out, budget.Release{Mechanism: budget.MechExponential, L0: q.l0, Epsilon: q.eps * float64(q.l0)})
		}
	}
	if s.sel != nil {
		if s.sel.method == selOptimal {
			// No noise: L0 binary decisions, each (ε/L0, δ/L0)-DP. Where
			// its probability crosses one half a decision is randomized
			// response, whose Rényi curve is above Laplace noise's at the
			// same ε (and far above a Gaussian's calibrated to it): it is
			// recorded as what it is, pure ε/L0 in each of L0 groups with
			// its δ an approximate part (red team:
			// TestOptimalSelectionRDPBoundsItsDivergence).
			out = append(out, budget.Release{Mechanism: budget.MechPure, L0: s.sel.l0, Epsilon: s.sel.eps})
		} else if err := add(s.sel.units); err != nil {
			return nil, err
		}
		out = append(out, budget.Release{Mechanism: budget.MechSelection, L0: 1, Delta: s.sel.delta - s.sel.noiseDel})
	}
	return out, nil
}

var pureRho = budget.PureRho

// zcdpCost is a query's cost under zCDP accounting: it is
// deltaApprox-approximately rho-zCDP (Bun & Steinke 2016). Each noised part
// adds its ρ (zCDP composes additively):
//
//   - Gaussian noise with σ on a value of L2 sensitivity Δ2 = √L0·L∞:
//     ρ = Δ2²/(2σ²), with σ exactly as the sampler calibrates it.
//   - Laplace noise of scale L0·L∞/ε: each of the L0 groups a person can
//     touch is released (ε/L0)-DP, hence (ε/L0)²/2-zCDP, and the L0 groups
//     compose to ρ = ε²/(2·L0).
//   - A quantile (exponential mechanism, ε/L0 per group): likewise
//     ρ = L0·(ε/L0)²/2.
//   - Partition selection: its noise as above, and the threshold's δ
//     (the chance that a group of one person is released) as the
//     approximate part; the optimal pre-aggregated selection costs as
//     Laplace thresholding does, ρ = ε²/(2·L0) with all of its δ
//     approximate (selection.go).
//
// The per-query δ that basic composition charges for Gaussian noise is not
// in deltaApprox: under zCDP the Gaussian's cost is all in ρ.
//
// The samplers are discretized versions of the continuous Laplace and
// Gaussian distributions (granularity snapping); ρ is that of the
// continuous mechanism, as the library's (ε, δ) calibration also assumes.
func zcdpCost(s *Spec) (rho, deltaApprox float64, err error) {
	gaussian := s.mech.Name() == conf.Gaussian
	add := func(p Part) error {
		if p.Bound.LInf == 0 || p.Bound.L0 == 0 {
			return nil // not noised: nothing about any person is released
		}
		if !gaussian {
			rho += pureRho(p.Share.Epsilon) / float64(p.Bound.L0)
			return nil
		}
		sigma, err := s.mech.StdDev(p.Bound.L0, p.Bound.LInf, p.Share.Epsilon, p.Share.Delta)
		if err != nil {
			return err
		}
		rho += budget.GaussianRho(p.Bound.L2(), sigma)
		return nil
	}
	for _, a := range s.aggs {
		for _, p := range a.Parts() {
			if err := add(p); err != nil {
				return 0, 0, err
			}
		}
		if q, ok := a.(interface{ rho() float64 }); ok {
			rho += q.rho()
		}
	}
	if s.sel != nil {
		if s.sel.method == selOptimal {
			// (ε/L0, δ/L0)-DP decisions in L0 groups (selection.go).
			rho += pureRho(s.sel.eps) / float64(s.sel.l0)
		} else if err := add(s.sel.units); err != nil {
			return 0, 0, err
		}
		deltaApprox += s.sel.delta - s.sel.noiseDel
	}
	return rho, deltaApprox, nil
}
