package budget

import (
	"math"
	"math/big"

	"github.com/dpproxy/dpproxy/conf"
)

// advancedAccountant is advanced composition (Dwork & Roth, Thm. 3.20) in
// the form that stays valid when the analyst chooses each query's ε after
// seeing earlier answers: a privacy filter (Rogers, Roth, Ullman & Vadhan,
// "Privacy Odometers and Filters", 2016), built as Whitehouse, Ramdas,
// Rogers & Wu, "Fully-Adaptive Composition in Differential Privacy"
// (ICML 2023) build theirs: a nonnegative supermartingale and Ville's
// inequality. Theorem 3.20 itself needs k and ε fixed before the first
// query; an interactive proxy is exactly the case where they are not.
//
// # The filter
//
// With the analyst's limits (ε_g, δ_g), δ′ = privacy.advanced_delta,
// c = ln(1/δ′) and the constant
//
//	λ = (c + √(c² + ε_g·c)) / ε_g,
//
// a sequence of charges (ε_i, δ_i) is admitted while, after the new charge,
//
//	Σδ_i + δ′ ≤ δ_g   and   ( Σε_i ≤ ε_g   or   A ≤ ε_g ),
//	A = (1 + λ)/2 · Σε_i² + c/λ.
//
// When δ_g < δ′ the filter has no δ to set aside and the accountant is
// basic composition (Σε_i ≤ ε_g, Σδ_i ≤ δ_g).
//
// # Why it is (ε_g, δ_g)-DP under fully adaptive composition
//
// Fix neighbours x, x′ and let ℓ_i be the privacy loss of the i-th release
// given the earlier ones, so that the loss of the whole transcript is
// L_n = Σ_{i≤n} ℓ_i (chain rule), and (ε, δ)-DP of the stopped transcript
// follows from P_x[L_N > ε_g] ≤ δ_g. ε_i may depend on earlier answers
// (it is "predictable"); a refused charge is decided from the ε's and δ's
// alone, which the analyst knows, so refusals reveal nothing.
//
//  1. δ parts. A release that is (ε_i, δ_i)-DP given the past is, outside
//     an event of probability δ_i, ε_i-DP: its privacy loss is within
//     ±ε_i with probability ≥ 1 − δ_i (Dwork & Roth, Lemma 3.17, the step
//     the proof of Thm. 3.20 uses). The filter keeps Σδ_i ≤ δ_g − δ′ on
//     every path, so the union F of these events has P(F) ≤ δ_g − δ′.
//  2. Outside F each |ℓ_i| ≤ ε_i, and E[ℓ_i | past] = KL ≤ ε_i²/2 (an
//     ε-DP mechanism is (ε²/2)-zCDP, Bun & Steinke 2016, Prop. 3.3, and
//     KL is the Rényi divergence of order 1). By Hoeffding's lemma (ℓ_i
//     lies in an interval of width 2ε_i), for any λ > 0
//     E[exp(λ(ℓ_i − ε_i²/2)) | past] ≤ exp(λ²ε_i²/2), so
//     M_n = exp(λ·Σ(ℓ_i − ε_i²/2) − (λ²/2)·Σε_i²) is a nonnegative
//     supermartingale with M_0 = 1, whatever the analyst does.
//  3. Ville's inequality: P(∃n: M_n ≥ 1/δ′) ≤ δ′. Outside that event,
//     for every n at once, L_n < (1 + λ)/2·Σε_i² + c/λ = A_n. The bound is
//     time-uniform, so it holds at the (random) last admitted charge N.
//  4. At N either Σε_i ≤ ε_g, and then outside F, L_N ≤ Σ|ℓ_i| ≤ ε_g
//     surely; or A_N ≤ ε_g, and then L_N < ε_g outside F and the Ville
//     event. So P(L_N > ε_g) ≤ (δ_g − δ′) + δ′ = δ_g.
//
// Taking "basic or the filter" is thus one filter, proved at once, not the
// better of two separately valid filters (which step 4 would not justify
// with δ parts: an analyst could steer towards whichever branch is about
// to fail). The cost is δ′: it is set aside from δ_g in both branches, so
// an analyst whose δ runs out (Gaussian queries, partition selection) may
// get up to δ′ less δ than under basic accounting; in ε, and for pure ε
// queries (Laplace without partition selection) in every respect, it never
// admits fewer queries than basic composition.
//
// λ depends only on the limits, never on the charges, which step 2 needs;
// it is the λ that admits the most Σε² (it maximises (ε_g − c/λ)/(1 + λ)).
// Step 2's mean ε_i²/2 is smaller than Thm. 3.20's ε_i(e^ε_i − 1), so at
// ε = 0.1 per query within (10, 1e-6) the filter admits 240 queries with
// δ′ = 1e-7 and 270 with δ′ = 1e-6, where Thm. 3.20 (non-adaptive, with
// δ′ = 1e-6) gives 216 and basic composition 100 (advanced_test.go).
//
// The filter is computed in float64; A is compared with a relative margin
// of 1e-12 in the limit's favour, so rounding can only refuse, never admit,
// a charge at the boundary. Σε_i² is kept exactly (epsilon_sq_spent).
type advancedAccountant struct {
	deltaPrime float64 // δ′ in (0, 1)
}

func (advancedAccountant) Name() string { return conf.AccountingAdvanced }

func (a advancedAccountant) Compose(t Totals, l Limits, c Charge) (Totals, bool) {
	next := t.plus(c)
	return next, a.within(next, l)
}

// active reports whether the limits leave δ′ to set aside; otherwise the
// accountant is basic composition.
func (a advancedAccountant) active(l Limits) bool {
	return numericOf(a.deltaPrime).Cmp(l.Delta) <= 0
}

// within is the filter's admission rule (see advancedAccountant).
func (a advancedAccountant) within(t Totals, l Limits) bool {
	if !a.active(l) {
		return withinBasic(t, l)
	}
	if t.Delta.Add(numericOf(a.deltaPrime)).Cmp(l.Delta) > 0 {
		return false
	}
	if t.Epsilon.Cmp(l.Epsilon) <= 0 {
		return true
	}
	e := AdvancedEpsilon(t.EpsilonSq.Float64(), l.Epsilon.Float64(), a.deltaPrime)
	if math.IsInf(e, 0) {
		return false
	}
	return new(big.Rat).SetFloat64(e*(1+1e-12)).Cmp(l.Epsilon.Rat()) <= 0
}

// AdvancedLambda is the filter's λ = (c + √(c² + ε_g·c))/ε_g, c = ln(1/δ′),
// for the limit epsLimit > 0 and δ′ in (0, 1).
func AdvancedLambda(epsLimit, deltaPrime float64) float64 {
	c := math.Log(1 / deltaPrime)
	return (c + math.Sqrt(c*c+epsLimit*c)) / epsLimit
}

// AdvancedEpsilon is the ε the filter certifies for Σε² = sumSq under the
// limit epsLimit (which fixes λ) and δ′: A = (1 + λ)/2·Σε² + ln(1/δ′)/λ.
// It returns +Inf when the arguments are out of range.
func AdvancedEpsilon(sumSq, epsLimit, deltaPrime float64) float64 {
	if !(sumSq >= 0) || math.IsInf(sumSq, 0) || !(epsLimit > 0) || math.IsInf(epsLimit, 0) ||
		!(deltaPrime > 0 && deltaPrime < 1) {
		return math.Inf(1)
	}
	lambda := AdvancedLambda(epsLimit, deltaPrime)
	return (1+lambda)/2*sumSq + math.Log(1/deltaPrime)/lambda
}

// Report is the budget in the filter's figures when it is active: δ spent
// includes the δ′ set aside, and ε spent is the smaller of Σε and A (the
// bound the admission rule uses), reported as advanced accounting. When it
// is not active, basic composition's figures.
func (a advancedAccountant) Report(t Totals, l Limits) Spend {
	s := basicSpend(t, l)
	if !a.active(l) {
		return s
	}
	s.Accounting = conf.AccountingAdvanced
	dSpent := t.Delta.Add(numericOf(a.deltaPrime))
	s.DeltaSpent = dSpent.Float64()
	s.deltaRemaining = remaining(l.Delta, dSpent)
	if e := AdvancedEpsilon(t.EpsilonSq.Float64(), l.Epsilon.Float64(), a.deltaPrime); e < s.EpsilonSpent {
		s.EpsilonSpent = e
		s.epsRemaining = math.Max(0, s.EpsilonLimit-e)
	}
	return s
}
