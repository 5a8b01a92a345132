package budget

import (
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/conf"
)

// Zero-concentrated differential privacy (zCDP; Bun & Steinke, "Concentrated
// Differential Privacy: Simplifications, Extensions, and Lower Bounds",
// TCC 2016). A mechanism is ρ-zCDP when the Rényi divergence of order α
// between its outputs on neighbouring inputs is at most ρα for every α > 1.
// ρ adds up under composition (their Lemma 2.3), and a Gaussian release costs
// ρ quadratic in 1/σ, so k Gaussian queries cost about √k times one query's
// ε instead of k times under sequential composition.
//
// Approximate zCDP (their Def. 8.1) allows a δ part: a mechanism is
// δ-approximately ρ-zCDP when, outside an event of probability δ, it is
// ρ-zCDP. Both ρ and δ add up. Partition selection (the threshold that a
// group of one person passes with probability δ) is accounted this way.

// GaussianRho is the ρ of the Gaussian mechanism with L2 sensitivity l2 and
// standard deviation sigma: ρ = l2²/(2σ²) (Bun & Steinke, Prop. 1.6).
func GaussianRho(l2, sigma float64) float64 {
	return l2 * l2 / (2 * sigma * sigma)
}

// PureRho is the ρ of an ε-DP mechanism: ρ = ε²/2 (Bun & Steinke,
// Prop. 1.4). An (ε, δ)-DP mechanism is likewise δ-approximately
// (ε²/2)-zCDP, because (ε, δ)-DP output distributions are, up to mass δ,
// ε-indistinguishable (Murtagh & Vadhan 2016, Lemma 3.2).
func PureRho(eps float64) float64 { return eps * eps / 2 }

// ZCDPEpsilon converts ρ-zCDP to (ε, δ)-DP with the conversion of
// Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
// Privacy" (NeurIPS 2020), Prop. 12 / Cor. 13: for every α > 1, ρ-zCDP
// implies (ε, δ)-DP with
//
//	ε = αρ + log(1 − 1/α) + (log(1/δ) − log α)/(α − 1),
//
// minimized over α (golden-section search on log(α − 1); any α gives a
// valid ε, so the search's precision affects only tightness), and never
// above Bun & Steinke's ρ + 2√(ρ·ln(1/δ)) (2016, Prop. 1.3), also valid.
// It returns +Inf when δ is not in (0, 1) or ρ is not a finite number
// >= 0, and 0 for ρ = 0.
func ZCDPEpsilon(rho, delta float64) float64 {
	if !(delta > 0 && delta < 1) || !(rho >= 0) || math.IsInf(rho, 0) {
		return math.Inf(1)
	}
	if rho == 0 {
		return 0
	}
	bs := rho + 2*math.Sqrt(rho*math.Log(1/delta))
	f := func(t float64) float64 {
		a := 1 + math.Exp(t)
		return a*rho + math.Log1p(-1/a) + (math.Log(1/delta)-math.Log(a))/(a-1)
	}
	// Bracket the minimum on a coarse grid of t = log(α − 1), then refine.
	best, bt := math.Inf(1), 0.0
	for t := -12.0; t <= 30; t += 0.25 {
		if v := f(t); v < best {
			best, bt = v, t
		}
	}
	lo, hi := bt-0.25, bt+0.25
	g := (math.Sqrt(5) - 1) / 2
	for range 100 {
		m1, m2 := hi-g*(hi-lo), lo+g*(hi-lo)
		if f(m1) < f(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	if v := f((lo + hi) / 2); v < best {
		best = v
	}
	return math.Min(best, bs)
}

// zcdpPart returns c's cost under zCDP accounting: ρ and the δ of its
// approximate part. A charge that does not state ρ is taken as (ε, δ)-DP,
// hence δ-approximately (ε²/2)-zCDP.
func (c Charge) zcdpPart() (rho, deltaApprox float64) {
	if c.Rho > 0 {
		return c.Rho, c.DeltaApprox
	}
	return PureRho(c.Epsilon), c.Delta
}

// zcdpAccountant is zero-concentrated DP as a privacy filter valid under
// fully adaptive composition, beside basic composition in one rule proved
// at once (as advanced.go's and rdp.go's).
//
// # The filter
//
// With the limits (ε_g, δ_g) and δ_z = s·δ_g (s = privacy.rdp_delta_share,
// which sets both filters' conversion δ) a charge is admitted iff, after it,
//
//	Σδ_approx + δ_z ≤ δ_g   and
//	( ZCDPEpsilon(Σρ, δ_z) ≤ ε_g   or   (Σδ = Σδ_approx and Σε ≤ ε_g) ).
//
// Σδ = Σδ_approx says that every charge so far is pure ε-DP up to its
// approximate part (no Gaussian noise, whose δ is not an approximate part).
//
// # Why it is (ε_g, δ_g)-DP
//
// As rdp.go's proof with two "orders". The zCDP filter M_z admits while
// Σρ_i ≤ B_ρ (B_ρ the largest ρ that converts to ε_g at δ_z). Since a
// ρ-zCDP release has Rényi curve αρ, the stopping rule is the same at
// every order α: Σαρ_i ≤ αB_ρ, so by Feldman & Zrnic (2021, Thm. 3.1)
// M_z's stopped interaction is (α, αB_ρ)-RDP at every α, i.e.
// B_ρ-zCDP, and the conversion (CKS 2020, Prop. 12, an instance of the
// RDP-to-DP conversion at one order) makes it (ε_g, δ_z)-DP. The basic
// branch M_∞ admits while Σε ≤ ε_g with pure charges: ε_g-DP (max
// divergence composes adaptively). The sums are monotone, so the
// transcripts where the zCDP branch holds at the end, and the rest (where
// the basic one does), partition the outcomes, and on each the run
// coincides with M_z, resp. M_∞; the approximate parts are outside an
// event of probability ≤ δ_g − δ_z (advanced.go, step 1). Total:
// (ε_g, δ_z + δ_g − δ_z).
//
// Before this rule the accountant admitted a charge when either basic
// composition or the zCDP conversion with δ_g − Σδ_approx kept the budget:
// each is valid alone for a fixed sequence, but no theorem covers taking
// whichever holds when mechanisms are mixed adaptively.
type zcdpAccountant struct {
	share float64 // s in (0, 1): δ_z = s·δ_g
}

func (zcdpAccountant) Name() string { return conf.AccountingZCDP }

func (a zcdpAccountant) Compose(t Totals, l Limits, c Charge) (Totals, bool) {
	next := t.plus(c)
	return next, a.within(next, l)
}

// deltaZ is δ_z for the limits.
func (a zcdpAccountant) deltaZ(l Limits) float64 { return a.share * l.Delta.Float64() }

// pure reports whether every charge in t is pure ε-DP up to its
// approximate part (Σδ = Σδ_approx).
func (t Totals) pure() bool { return t.Delta.Cmp(t.DeltaApprox) == 0 }

func (a zcdpAccountant) within(t Totals, l Limits) bool {
	dz := a.deltaZ(l)
	if t.DeltaApprox.Add(numericOf(dz)).Cmp(l.Delta) > 0 {
		return false
	}
	if t.pure() && t.Epsilon.Cmp(l.Epsilon) <= 0 {
		return true
	}
	return withinZCDP(t.Rho.Float64(), dz, l)
}

// withinZCDP reports whether ρ converts within the ε limit at δ_z
// (dz > 0), with a relative margin of 1e-12 in the limit's favour.
func withinZCDP(rho, dz float64, l Limits) bool {
	ez := ZCDPEpsilon(rho, dz)
	if math.IsInf(ez, 0) {
		return false
	}
	return new(big.Rat).SetFloat64(ez*(1+1e-12)).Cmp(l.Epsilon.Rat()) <= 0
}

// Report is the budget in the filter's figures: δ spent includes δ_z, set
// aside, and ε spent is the smaller of the conversion at δ_z and, while
// every charge is pure, Σε (exactly).
func (a zcdpAccountant) Report(t Totals, l Limits) Spend {
	s := basicSpend(t, l)
	s.Accounting = conf.AccountingZCDP
	dz := a.deltaZ(l)
	dSpent := t.DeltaApprox.Add(numericOf(dz))
	s.DeltaSpent = dSpent.Float64()
	s.deltaRemaining = remaining(l.Delta, dSpent)
	ez := ZCDPEpsilon(t.Rho.Float64(), dz)
	if !t.pure() || ez < s.EpsilonSpent {
		s.EpsilonSpent = ez
		s.epsRemaining = math.Max(0, s.EpsilonLimit-ez)
	}
	return s
}
