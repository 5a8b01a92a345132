package budget

import (
	"math"

	"github.com/dpproxy/dpproxy/conf"
)

// rdpAccountant is Rényi differential privacy (Mironov, "Rényi
// Differential Privacy", CSF 2017) composed over a fixed grid of orders α
// (rdpOrders, and α = ∞), as a privacy filter valid under fully adaptive
// composition (Feldman & Zrnic, "Individual Privacy Accounting via a Rényi
// Filter", NeurIPS 2021, Thm. 3.1), with the union over the orders paid in
// δ. It is the default accounting.
//
// # The curves
//
// A mechanism is (α, R)-RDP when the Rényi divergence of order α between
// its outputs on neighbouring inputs is at most R; R adds up over a
// sequence of releases (Mironov, Prop. 1), also when each is chosen after
// the earlier answers. Each release (release.go) has the curve R(α):
//
//   - Laplace noise of scale b on L0 groups of L∞ sensitivity each: each
//     group is Laplace with ε_p = L∞/b, and (Mironov, Prop. 6, Table II)
//     R_p(α) = 1/(α−1)·log(α/(2α−1)·e^{(α−1)ε_p} + (α−1)/(2α−1)·e^{−αε_p}),
//     R_p(∞) = ε_p; the L0 groups compose, R = L0·R_p.
//   - Gaussian noise of standard deviation σ (exactly as the sampler
//     calibrates it) on L2 sensitivity Δ₂: R(α) = αΔ₂²/(2σ²) (Mironov,
//     Prop. 7), R(∞) = +∞.
//   - The exponential mechanism of a quantile, ε/L0 in each of L0 groups:
//     dp/quantile.go samples ∝ exp(ε_p·u/(2Δu)), so the log-ratio of its
//     output probabilities on neighbours ranges over an interval of width
//     ε_p: it is ε_p-bounded-range (Durfee & Rogers 2019), hence
//     (ε_p²/8)-zCDP (Cesar & Rogers, "Bounding, Concentrating, and
//     Truncating: Unifying Privacy Loss Composition for Data Analytics",
//     ALT 2021), and ε_p-DP: R_p(α) = min(ε_p, αε_p²/8), R = L0·R_p.
//   - A pure release (MechPure): ε/L0-DP in each of L0 groups, R_p(α) =
//     min(ε_p, αε_p²/2) (Bun & Steinke 2016, Prop. 3.3), R = L0·R_p. A
//     release of unknown kind (charges that state no releases, and every
//     charge recorded before dpproxy.releases existed) is one with L0 = 1:
//     (ε, δ)-DP read as δ-approximately ε-DP, δ an approximate part.
//   - Partition selection: its threshold's δ (the chance a group one
//     person creates is released) is an approximate part; thresholding's
//     noise is one of the above, and the optimal pre-aggregated selection
//     (no noise: a Bernoulli draw per group, randomized response where
//     its probability crosses one half, which is above the Laplace curve)
//     is a pure release over its L0 groups.
//
// The samplers are discretized versions of the continuous Laplace and
// Gaussian distributions; the curves are the continuous mechanisms', as the
// library's calibration and the zCDP accountant also assume.
//
// # The filter
//
// With the analyst's limits (ε_g, δ_g), δ_c = s·δ_g (s = privacy.rdp_delta_share,
// conf.DefaultRDPDeltaShare) is set aside for converting RDP to (ε, δ) and
// the rest, δ_g − δ_c, is for the approximate parts. The finite orders get
// weights w_α with Σw_α = 1, fixed by the limits alone (rdpWeights): 0.99
// on the order α* that admits the most RDP per unit of α (the best order
// for Gaussian-like curves, ≈ 3.75–4 for (10, 1e-6) and any small per-query
// ε), the rest spread evenly. B_α is the largest total whose conversion
// (Balle, Barthe, Gaboardi, Hsu & Sato, "Hypothesis Testing Interpretations
// and Renyi Differential Privacy", AISTATS 2020, Thm. 21:
// (α, R)-RDP ⇒ (R + log((α−1)/α) − (log δ + log α)/(α−1), δ)-DP) at
// δ = w_α·δ_c is ε_g, and B_∞ = ε_g. A charge is admitted iff, after it,
//
//	Σδ_approx + δ_c ≤ δ_g   and   some α (∞ included) has S_α ≤ B_α,
//
// S_α being the sum of the curves at α of every release charged so far
// (S_∞: Σε, exactly, while no Gaussian release makes it infinite).
//
// # Why it is (ε_g, δ_g)-DP under fully adaptive composition
//
//  1. δ parts: as advanced.go's step 1, outside an event F with
//     P(F) ≤ δ_g − δ_c every release with an approximate part behaves as
//     its pure part (Σδ_approx ≤ δ_g − δ_c on every path).
//  2. For each order α let M_α be the single-order Rényi filter that
//     admits a charge iff S_α ≤ B_α after it (and refuses, releasing
//     nothing, otherwise). By Feldman & Zrnic, Thm. 3.1, M_α's whole
//     interaction is (α, B_α)-RDP for any adaptive analyst, hence
//     (ε_g, w_α·δ_c)-DP by the conversion; M_∞ is ε_g-DP (max divergence
//     composes adaptively by the chain rule).
//  3. The sums S_α only grow. Let T_α be the transcripts after which α is
//     the first order (in a fixed order) with S_α ≤ B_α; every admitted
//     charge leaves some order within, so the T_α partition all
//     transcripts. On T_α the run coincides with M_α's: every charge this
//     filter admitted left S_α ≤ its final value ≤ B_α, so M_α admits it
//     too, and every charge this filter refused exceeded every order,
//     α included, so M_α refuses it too. T_α is a function of the
//     transcript (the costs are), so for any set of outcomes S,
//     P_x(S ∩ T_α) ≤ e^{ε_g}·P_x′(S ∩ T_α) + w_α·δ_c, and summing over the
//     orders, P_x(S) ≤ e^{ε_g}·P_x′(S) + δ_c (+ P(F) ≤ δ_g − δ_c).
//
// The rule depends only on the costs, which the analyst knows, never on
// the data, so refusals reveal nothing. A pure ε sequence (Laplace, the
// exponential mechanism, no partition selection) is never admitted less
// than under basic composition: the ∞ order is Σε ≤ ε_g. δ_c is the price:
// an analyst whose approximate parts use up δ_g − δ_c gets no more
// partition selection (as advanced.go's δ′). The weights depend on the
// limits, which an operator's grant changes: a grant restarts the guarantee
// from the new limits, as it does for the advanced filter's λ.
//
// Sums are float64; S_α is compared with B_α with a relative margin of
// 1e-9 in the limit's favour, so rounding can only refuse, never admit, at
// the boundary. With s = 0.9, ε = 0.1 Laplace queries within (10, 1e-6):
// 320 admitted (321 with s = 0.99; a single order with all of δ would give
// 323), ε = 1: 10 (rdp_test.go, TestRDPCounts).
type rdpAccountant struct {
	share float64 // s in (0, 1]: δ_c = s·δ_g
}

// rdpOrders are the finite orders of the grid; the ∞ order follows them in
// Totals.RDP. Changing the grid makes every stored sum stale: the ledger
// recomputes them from dpproxy.releases (rdpfold.go).
var rdpOrders = []float64{
	1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75, 4, 4.25, 4.5, 4.75, 5,
	5.5, 6, 6.5, 7, 8, 9, 10, 12, 14, 16, 20, 24, 32, 48, 64, 128, 256, 512, 1024,
}

// rdpMainWeight is w_α* (see rdpAccountant).
const rdpMainWeight = 0.99

// rdpMargin is the relative margin of the comparison S_α ≤ B_α.
const rdpMargin = 1e-9

func (rdpAccountant) Name() string { return conf.AccountingRDP }

func (a rdpAccountant) Compose(t Totals, l Limits, c Charge) (Totals, bool) {
	next := t.plus(c)
	return next, a.within(next, l)
}

// deltaConv is δ_c for the limits.
func (a rdpAccountant) deltaConv(l Limits) float64 { return a.share * l.Delta.Float64() }

func (a rdpAccountant) within(t Totals, l Limits) bool {
	dc := a.deltaConv(l)
	if t.DeltaApprox.Add(numericOf(dc)).Cmp(l.Delta) > 0 {
		return false
	}
	s := t.rdp()
	if !math.IsInf(s[len(rdpOrders)], 0) && t.Epsilon.Cmp(l.Epsilon) <= 0 {
		return true
	}
	eg := l.Epsilon.Float64()
	w := rdpWeights(eg, dc)
	for i, alpha := range rdpOrders {
		if b := RDPBudget(alpha, eg, w[i]*dc); s[i]*(1+rdpMargin) <= b {
			return true
		}
	}
	return false
}

// Report is the budget in the filter's figures: δ spent includes δ_c, set
// aside, and ε spent is the smallest ε any order certifies (the ∞ order's
// Σε, exactly, or an order's conversion at its share of δ_c).
func (a rdpAccountant) Report(t Totals, l Limits) Spend {
	s := basicSpend(t, l)
	s.Accounting = conf.AccountingRDP
	dc := a.deltaConv(l)
	dSpent := t.DeltaApprox.Add(numericOf(dc))
	s.DeltaSpent = dSpent.Float64()
	s.deltaRemaining = remaining(l.Delta, dSpent)
	sums := t.rdp()
	best := math.Inf(1)
	if !math.IsInf(sums[len(rdpOrders)], 0) {
		best = s.EpsilonSpent
	}
	eg := l.Epsilon.Float64()
	w := rdpWeights(eg, dc)
	for i, alpha := range rdpOrders {
		if e := RDPToDP(alpha, sums[i]*(1+rdpMargin), w[i]*dc); e < best {
			best = e
		}
	}
	if best < s.EpsilonSpent || math.IsInf(sums[len(rdpOrders)], 0) {
		s.EpsilonSpent = best
		s.epsRemaining = math.Max(0, s.EpsilonLimit-best)
	}
	return s
}

// rdp returns t's sums over the grid (zeros when t has none).
func (t Totals) rdp() []float64 {
	if len(t.RDP) == len(rdpOrders)+1 {
		return t.RDP
	}
	return make([]float64, len(rdpOrders)+1)
}

// plusRDP returns sums with the curves of rs added, in a new slice.
func plusRDP(sums []float64, rs []Release) []float64 {
	out := make([]float64, len(rdpOrders)+1)
	copy(out, sums)
	for _, r := range rs {
		for i, alpha := range rdpOrders {
			out[i] += RDPCurve(r, alpha)
		}
		out[len(rdpOrders)] += r.pureEpsilon()
	}
	return out
}

// RDPCurve is the release's Rényi divergence bound at the finite order
// alpha > 1 (see rdpAccountant).
func RDPCurve(r Release, alpha float64) float64 {
	l0 := float64(r.L0)
	switch r.Mechanism {
	case MechLaplace:
		return l0 * LaplaceRDP(alpha, r.Sensitivity/r.Scale)
	case MechGaussian:
		return alpha * r.Sensitivity * r.Sensitivity / (2 * r.Scale * r.Scale)
	case MechExponential:
		e := r.Epsilon / l0
		return l0 * math.Min(e, alpha*e*e/8)
	case MechPure:
		e := r.Epsilon / l0
		return l0 * math.Min(e, alpha*e*e/2)
	}
	return 0
}

// LaplaceRDP is the Rényi divergence of order alpha > 1 of the Laplace
// mechanism with ε = sensitivity/scale (Mironov 2017, Prop. 6), computed
// with log-sum-exp, never above ε.
func LaplaceRDP(alpha, eps float64) float64 {
	if eps == 0 {
		return 0
	}
	x := math.Log(alpha/(2*alpha-1)) + (alpha-1)*eps
	y := math.Log((alpha-1)/(2*alpha-1)) - alpha*eps
	m := math.Max(x, y)
	r := (m + math.Log(math.Exp(x-m)+math.Exp(y-m))) / (alpha - 1)
	return math.Min(r, eps)
}

// RDPToDP is the ε of (α, r)-RDP at δ (Balle et al. 2020, Thm. 21):
// r + log((α−1)/α) − (log δ + log α)/(α−1); +Inf when δ <= 0.
func RDPToDP(alpha, r, delta float64) float64 {
	if !(delta > 0) {
		return math.Inf(1)
	}
	return r + math.Log((alpha-1)/alpha) - (math.Log(delta)+math.Log(alpha))/(alpha-1)
}

// RDPBudget is B_α: the largest r with RDPToDP(alpha, r, delta) <= eps
// (−Inf when δ <= 0).
func RDPBudget(alpha, eps, delta float64) float64 {
	if !(delta > 0) {
		return math.Inf(-1)
	}
	return eps - math.Log((alpha-1)/alpha) + (math.Log(delta)+math.Log(alpha))/(alpha-1)
}

// rdpWeights are the w_α of the finite orders for the limit eg and δ_c:
// rdpMainWeight on the order with the largest B_α/α, the rest evenly.
func rdpWeights(eg, dc float64) []float64 {
	n := len(rdpOrders)
	main, bestV := 0, math.Inf(-1)
	for i, alpha := range rdpOrders {
		if v := RDPBudget(alpha, eg, rdpMainWeight*dc) / alpha; v > bestV {
			main, bestV = i, v
		}
	}
	w := make([]float64, n)
	for i := range w {
		w[i] = (1 - rdpMainWeight) / float64(n-1)
	}
	w[main] = rdpMainWeight
	return w
}
