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

// ZCDPEpsilon converts ρ-zCDP to (ε, δ)-DP: ρ-zCDP implies
// (ρ + 2√(ρ·ln(1/δ)), δ)-DP for every δ in (0, 1) (Bun & Steinke,
// Prop. 1.3). It returns +Inf when δ is not in (0, 1) or ρ is not a finite
// number >= 0.
func ZCDPEpsilon(rho, delta float64) float64 {
	if !(delta > 0 && delta < 1) || !(rho >= 0) || math.IsInf(rho, 0) {
		return math.Inf(1)
	}
	return rho + 2*math.Sqrt(rho*math.Log(1/delta))
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

// zcdpAccountant tracks zCDP beside basic composition: every charge adds its
// ρ and the δ of its approximate part (zcdpPart), and a charge is admitted
// when either basic composition keeps the budget or the zCDP totals,
// converted to (ε, δ) with the rest of the δ limit, do (both bound the same
// sequence of mechanisms, so either suffices).
type zcdpAccountant struct{}

func (zcdpAccountant) Name() string { return conf.AccountingZCDP }

func (zcdpAccountant) Compose(t Totals, l Limits, c Charge) (Totals, bool) {
	next := t.plus(c)
	return next, withinBasic(next, l) || withinZCDP(next, l)
}

// Report shows the zCDP figures when they are the tighter bound (inZCDP).
func (zcdpAccountant) Report(t Totals, l Limits) Spend {
	s := basicSpend(t, l)
	s.inZCDP()
	return s
}

// withinZCDP reports whether the zCDP totals keep within the limits: with
// δ' = δ limit − Σδ_approx, ρ + 2√(ρ·ln(1/δ')) <= ε limit (ZCDPEpsilon).
// δ' must be > 0 before the logarithm (the guard the ledger's SQL CASE
// once evaluated first, so that ln never saw a δ' <= 0): the approximate
// parts alone may use up the δ limit, and then the conversion has no δ
// left and nothing fits this way. The guard compares exactly; the
// conversion is float64, as ZCDPEpsilon and the tests' closed forms compute
// it (that SQL computed it in numeric: the two can differ only when the
// converted ε lies within about 1e-15 of the limit).
func withinZCDP(t Totals, l Limits) bool {
	if t.DeltaApprox.Cmp(l.Delta) >= 0 {
		return false
	}
	ez := ZCDPEpsilon(t.Rho.Float64(), l.Delta.Sub(t.DeltaApprox).Float64())
	if math.IsInf(ez, 0) {
		return false
	}
	return new(big.Rat).SetFloat64(ez).Cmp(l.Epsilon.Rat()) <= 0
}

// inZCDP switches the figures to zCDP when that accounting gives the
// smaller ε, or when basic composition no longer fits the limits.
func (s *Spend) inZCDP() {
	ez := ZCDPEpsilon(s.Rho, s.DeltaLimit-s.DeltaApprox)
	if math.IsInf(ez, 0) {
		return
	}
	basicFits := s.EpsilonSpent <= s.EpsilonLimit && s.DeltaSpent <= s.DeltaLimit
	if basicFits && s.EpsilonSpent <= ez {
		return
	}
	s.Accounting = conf.AccountingZCDP
	s.EpsilonSpent, s.DeltaSpent = ez, s.DeltaApprox
	s.exact = false
}
