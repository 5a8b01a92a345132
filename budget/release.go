package budget

import (
	"fmt"
	"math"
)

// Mechanism names the kind of a Release, as dpproxy.releases records it.
type Mechanism string

// The mechanisms a release can be.
const (
	// MechLaplace is Laplace noise: Scale is b, Sensitivity the L∞
	// sensitivity of each of the L0 groups a person can touch (b =
	// L0·L∞/ε, so each group is released (L∞/b)-DP).
	MechLaplace Mechanism = "laplace"
	// MechGaussian is Gaussian noise: Scale is σ exactly as the sampler
	// calibrates it, Sensitivity the L2 sensitivity √L0·L∞.
	MechGaussian Mechanism = "gaussian"
	// MechExponential is the exponential mechanism of a quantile
	// (dp/quantile.go): Epsilon in total, Epsilon/L0 in each of L0
	// groups, sampled ∝ exp(ε·u/(2Δu)) (bounded range, see rdp.go).
	MechExponential Mechanism = "exponential"
	// MechSelection is partition selection's threshold: a group one
	// person creates passes with probability at most Delta. Its noise is a
	// Laplace or Gaussian release of its own; this release carries only
	// that δ, an approximate part.
	MechSelection Mechanism = "selection"
	// MechPure is an (Epsilon, Delta)-DP release of unknown kind, with
	// Epsilon/L0 in each of L0 groups: a charge that states no releases,
	// and every charge recorded before dpproxy.releases existed, is read
	// as one with L0 = 1 (conservative: any ε-DP mechanism has this
	// curve; δ is an approximate part). The optimal partition selection
	// records its L0 Bernoulli decisions as one (dp/cost.go).
	MechPure Mechanism = "pure"
)

// Release is one randomized part of a charged query: what the RDP
// accountant (rdp.go) needs to compute its Rényi curve, recorded in
// dpproxy.releases with the charge.
type Release struct {
	Mechanism Mechanism
	// L0 is the number of groups (partitions) one person can touch.
	L0 int64
	// Sensitivity is L∞ (Laplace) or L2 (Gaussian); 0 otherwise.
	Sensitivity float64
	// Scale is the Laplace b or the Gaussian σ; 0 otherwise.
	Scale float64
	// Epsilon and Delta are the release's share of the charge's (ε, δ).
	Epsilon, Delta float64
}

// conservative is the one release a charge without releases is read as.
func (c Charge) releases() []Release {
	if len(c.Releases) > 0 {
		return c.Releases
	}
	return []Release{{Mechanism: MechPure, L0: 1, Epsilon: c.Epsilon, Delta: c.Delta}}
}

// check refuses a release whose curve cannot be computed.
func (r Release) check() error {
	finite := func(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }
	if r.L0 < 1 || !finite(r.Sensitivity) || !finite(r.Scale) || !finite(r.Epsilon) || !(r.Delta >= 0 && r.Delta < 1) {
		return fmt.Errorf("release %+v: L0 must be >= 1 and every amount finite and >= 0 (δ < 1)", r)
	}
	switch r.Mechanism {
	case MechLaplace, MechGaussian:
		if !(r.Sensitivity > 0 && r.Scale > 0) {
			return fmt.Errorf("%s release needs a sensitivity and a scale > 0", r.Mechanism)
		}
	case MechExponential, MechPure, MechSelection:
	default:
		return fmt.Errorf("unknown mechanism %q", r.Mechanism)
	}
	return nil
}

// approxDelta is the release's δ that the RDP accountant counts apart
// from the curve (an approximate part): the threshold of partition
// selection, and the δ of a release of unknown kind.
func (r Release) approxDelta() float64 {
	switch r.Mechanism {
	case MechSelection, MechPure:
		return r.Delta
	}
	return 0
}

// pureEpsilon is the release's curve at α = ∞ (its max divergence): +Inf
// for Gaussian noise.
func (r Release) pureEpsilon() float64 {
	switch r.Mechanism {
	case MechLaplace:
		return float64(r.L0) * r.Sensitivity / r.Scale
	case MechGaussian:
		return math.Inf(1)
	case MechExponential, MechPure:
		return r.Epsilon
	}
	return 0
}

// validateReleases refuses a charge whose releases cannot be composed or do
// not add up to it: their pure ε (the ∞ order) must not exceed the
// charge's ε, which the RDP accountant uses as the exact Σε, and their
// approximate δ not the charge's approximate δ (zcdpPart), which it sums.
//
// The approximate δ of a charge may not exceed its δ: the zCDP filter reads
// Σδ = Σδ_approx as "every charge pure up to its approximate part".
func validateReleases(c Charge) error {
	if _, d := c.zcdpPart(); d > c.Delta {
		return &InvalidChargeError{Reason: fmt.Sprintf("approximate δ=%v exceeds the charge's δ=%v", d, c.Delta)}
	}
	var eps, dApprox float64
	for _, r := range c.Releases {
		if err := r.check(); err != nil {
			return &InvalidChargeError{Reason: err.Error()}
		}
		eps += r.pureEpsilon()
		dApprox += r.approxDelta()
	}
	if len(c.Releases) == 0 {
		return nil
	}
	_, chargeApprox := c.zcdpPart()
	const slack = 1 + 1e-9
	if !math.IsInf(eps, 0) && eps > c.Epsilon*slack {
		return &InvalidChargeError{Reason: fmt.Sprintf("releases spend ε=%v, more than the charge's %v", eps, c.Epsilon)}
	}
	if dApprox > chargeApprox*slack {
		return &InvalidChargeError{Reason: fmt.Sprintf("releases' approximate δ=%v exceeds the charge's %v", dApprox, chargeApprox)}
	}
	return nil
}
