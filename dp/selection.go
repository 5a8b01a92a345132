package dp

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Partition selection: when a group key has no public values, a group is
// released only through a randomized decision on its number of distinct
// units (after contribution bounding), so that a group one person creates
// is released with probability at most δ. Two mechanisms are available,
// both (ε, δ)-DP at the selection's share and both functions of the unit
// count only:
//
//   - threshold: the unit count noised by the session's mechanism
//     (Laplace or Gaussian, L∞ = 1 over L0 groups) is compared with the
//     library's threshold (noise.Mechanism.Threshold);
//   - optimal: the pre-aggregated partition selection of Desfontaines,
//     Voss, Gipson and Mandayam, "Differentially private partition
//     selection" (PoPETs 2022, arXiv 2006.03684), which Google's go/v3
//     implements as dpagg.PreAggSelectPartition for L0 ≤ 3. A group of n
//     units is kept with probability p(n), the largest that the
//     per-group (ε/L0, δ/L0)-DP constraints allow (Theorem 1):
//     p(0) = 0, p(n) = min(e^(ε/L0)·p(n−1) + δ/L0,
//     1 − e^(−ε/L0)·(1 − p(n−1) − δ/L0), 1), computed in closed form as
//     the library does (optimalKeepProbability). It needs no noised
//     part: one Bernoulli draw from crypto/rand per group.
//
// Which one a query uses is a function of public parameters only (ε, δ,
// L0, the mechanism), so choosing costs nothing: with k* the fewest units
// at which either releases a group half the time (the smaller k50), the
// one that releases a group of k* units more often. With Laplace the optimal
// selection releases at least as often at every n (it is optimal among
// all (ε/L0, δ/L0)-DP decisions on the count, which Laplace thresholding
// is one of); with Gaussian noise, which adds √L0 instead of L0, the
// threshold wins from about L0 = 3 (the library itself switches to
// Gaussian thresholding above 3). bench/selection.go prints both curves.
//
// The library's implementation is not called directly because it uses
// the optimal selection only for L0 ≤ 3 (Gaussian thresholding above,
// a second mechanism inside a Laplace query), while the optimal one beats
// Laplace thresholding at every L0. The closed form here is the
// library's own (keepPartitionProbability in dpagg/select_partition.go),
// with expm1 where the library loses precision for small ε; the tests
// check it against the library's GetHardThreshold and its
// ShouldKeepPartition.
//
// Cost. Basic composition: (ε, δ) of the selection's share, as for the
// threshold. zCDP: each group's decision is (ε/L0, δ/L0)-DP with a
// binary output, hence δ/L0-approximately (ε/L0)²/2-zCDP (an
// (ε, δ)-indistinguishable pair is δ-close in total variation to an
// ε-indistinguishable one, Dwork & Roth Lemma 3.17; ε-DP is ε²/2-zCDP,
// Bun & Steinke 2016 Prop. 1.4), and the L0 groups one unit touches
// compose to δ-approximately ε²/(2·L0)-zCDP: the same ρ and δ_approx as
// Laplace thresholding (cost.go).
type selection struct {
	method selMethod
	eps    float64 // ε of the selection
	l0     int64
	delta  float64 // δ of the selection: noise and threshold together
	// threshold method: the noisy unit count and its threshold.
	units     Part    // the noisy unit count: L0 groups, L∞ = 1
	noiseDel  float64 // the part of delta the (Gaussian) noise takes
	threshold float64
	sd        float64 // the standard deviation of the count's noise
	// k50 of both methods (units at which a group is released half the
	// time) and the optimal method's hard threshold (units from which it
	// always releases).
	k50Threshold, k50Optimal, hard float64
}

type selMethod int

const (
	selThreshold selMethod = iota
	selOptimal
)

// newSelection builds both candidate selections for the selection's share
// sel and keeps the one that releases more (at the smaller k50).
func newSelection(m noise.Mechanism, l0 int64, sel sensitivity.Share, gaussian bool) (*selection, error) {
	// The selection's δ pays for the threshold (the chance that a group
	// of one person passes it); Gaussian noise takes half of it.
	s := &selection{delta: sel.Delta, eps: sel.Epsilon, l0: l0}
	thresholdDelta := sel.Delta
	if gaussian {
		s.noiseDel, thresholdDelta = sel.Delta/2, sel.Delta/2
	}
	s.units = Part{sensitivity.DistinctUnits(l0), sensitivity.Share{Epsilon: sel.Epsilon, Delta: s.noiseDel}}
	var err error
	s.threshold, err = m.Threshold(l0, 1, sel.Epsilon, s.noiseDel, thresholdDelta)
	if err != nil {
		return nil, refuse("partition selection: %v", err)
	}
	if err := s.units.check(m); err != nil {
		return nil, err
	}
	if s.sd, err = m.StdDev(l0, 1, sel.Epsilon, s.noiseDel); err != nil {
		return nil, refuse("partition selection: %v", err)
	}
	s.k50Threshold = smallestUnits(func(n float64) float64 { return s.thresholdProbability(gaussian, n) }, 0.5)
	s.k50Optimal = smallestUnits(func(n float64) float64 { return optimalKeepProbability(n, l0, sel.Epsilon, sel.Delta) }, 0.5)
	s.hard = smallestUnits(func(n float64) float64 { return optimalKeepProbability(n, l0, sel.Epsilon, sel.Delta) }, 1)
	// At k* = the smaller k50, keep the method that releases a group of
	// k* units more often (ties: the threshold).
	k := math.Min(s.k50Optimal, s.k50Threshold)
	if optimalKeepProbability(k, l0, sel.Epsilon, sel.Delta) > s.thresholdProbability(gaussian, k) {
		s.method, s.noiseDel = selOptimal, 0
	}
	return s, nil
}

// thresholdProbability is the probability that a group of n units passes
// the threshold: n plus Laplace noise of scale b = sd/√2, or Gaussian
// noise of deviation sd, at least the threshold (the samplers'
// discretization, a granularity of 2^-40 of the scale, is ignored).
func (s *selection) thresholdProbability(gaussian bool, n float64) float64 {
	d := n - s.threshold
	if gaussian {
		return 0.5 * math.Erfc(-d/(s.sd*math.Sqrt2))
	}
	b := s.sd / math.Sqrt2
	if d >= 0 {
		return 1 - 0.5*math.Exp(-d/b)
	}
	return 0.5 * math.Exp(d/b)
}

// probability is the chosen method's release probability for a group of
// n units.
func (s *selection) probability(gaussian bool, n float64) float64 {
	if s.method == selOptimal {
		return optimalKeepProbability(n, s.l0, s.eps, s.delta)
	}
	return s.thresholdProbability(gaussian, n)
}

// keep reports whether a group of units distinct units is released.
func (s *selection) keep(m noise.Mechanism, rnd io.Reader, units float64) (bool, error) {
	if s.method == selOptimal {
		return bernoulli(rnd, optimalKeepProbability(math.Round(units), s.l0, s.eps, s.delta))
	}
	nu, err := s.units.add(m, units)
	if err != nil {
		return false, err
	}
	return nu >= s.threshold, nil
}

// bernoulli returns true with probability p rounded down to a multiple of
// 2^-53 (never more than p): 53 random bits v, true when v < ⌊p·2^53⌋.
func bernoulli(rnd io.Reader, p float64) (bool, error) {
	var b [8]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return false, err
	}
	v := binary.LittleEndian.Uint64(b[:]) >> 11
	return float64(v) < math.Floor(p*(1<<53)), nil
}

// optimalKeepProbability is p(n) of the optimal pre-aggregated partition
// selection at (eps, delta) over l0 groups: the closed form of the
// recurrence (the library's keepPartitionProbability). With pε = ε/L0 and
// pδ = δ/L0, the first branch e^(pε)·p(n−1) + pδ holds up to
// n_cr = 1 + ⌊ln((1 + e^(−pε)(2pδ − 1)) / (pδ(1 + e^(−pε)))) / pε⌋, where
// p(n) = pδ·(e^(n·pε) − 1)/(e^(pε) − 1); beyond it, with m = n − n_cr,
// p(n) = min(1, 1 − e^(−m·pε)(1 − p(n_cr)) + pδ·Σ_{j=1..m} e^(−j·pε)).
// n is a whole number; n ≤ 0 gives 0.
func optimalKeepProbability(n float64, l0 int64, eps, delta float64) float64 {
	if !(n >= 1) {
		return 0
	}
	pe, pd := eps/float64(l0), delta/float64(l0)
	em1 := math.Expm1(pe) // e^pε − 1, exact for small pε
	ncr := 1 + math.Floor(math.Log((1+math.Exp(-pe)*(2*pd-1))/(pd*(1+math.Exp(-pe))))/pe)
	first := func(k float64) float64 { // pδ·Σ_{j=0..k−1} e^(j·pε)
		return pd * math.Expm1(k*pe) / em1
	}
	if n <= ncr {
		return math.Min(first(n), 1)
	}
	pcr := first(ncr)
	m := n - ncr
	// Σ_{j=1..m} e^(−j·pε) = (1 − e^(−m·pε)) / (e^pε − 1)
	tail := -math.Expm1(-m*pe) / em1
	return math.Min(1-math.Exp(-m*pe)*(1-pcr)+pd*tail, 1)
}

// smallestUnits returns the smallest whole n ≥ 1 with prob(n) ≥ level for
// a non-decreasing prob, by doubling then bisection (at most 2^60).
func smallestUnits(prob func(float64) float64, level float64) float64 {
	hi := 1.0
	for prob(hi) < level {
		if hi >= 1<<60 {
			return math.Inf(1)
		}
		hi *= 2
	}
	lo := hi / 2 // prob(lo) < level, or lo < 1
	if hi == 1 {
		return 1
	}
	for hi-lo > 1 {
		mid := math.Floor((lo + hi) / 2)
		if prob(mid) >= level {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// explain is EXPLAIN DP's line: the method used and, for comparison,
// the other one's k50.
func (s *selection) explain() string {
	if s.method == selOptimal {
		return fmt.Sprintf("Partition selection: a group is released when a random draw with a probability set by its count of distinct units succeeds (optimal pre-aggregated selection, L0=%d, ε=%s δ=%s): a group of one unit at most δ/L0, half the time at %s units, always from %s; thresholding a noisy count would need %s units for half",
			s.l0, formatNum(s.eps), formatNum(s.delta), wholeUnits(s.k50Optimal), wholeUnits(s.hard), wholeUnits(s.k50Threshold))
	}
	return fmt.Sprintf("Partition selection: a group is released when its noisy count of distinct units (L0=%d L∞=1, ε=%s δ=%s) reaches %s (half the time at %s units; the optimal pre-aggregated selection would need %s)",
		s.units.Bound.L0, formatNum(s.units.Share.Epsilon), formatNum(s.delta), humanBound(s.threshold), wholeUnits(s.k50Threshold), wholeUnits(s.k50Optimal))
}

// wholeUnits prints a number of units found by smallestUnits.
func wholeUnits(v float64) string {
	if math.IsInf(v, 0) {
		return "more than 2^60"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// SelectionCurve is partition selection at one setting, for bench/ and
// tests: both methods' release probabilities and the one the release
// uses. Safe for concurrent use.
type SelectionCurve struct {
	sel      *selection
	gaussian bool
}

// NewSelectionCurve builds partition selection for a query whose
// selection share is (eps, delta) over l0 groups with mechanism m.
func NewSelectionCurve(m noise.Mechanism, l0 int64, eps, delta float64) (*SelectionCurve, error) {
	gaussian := m.Name() == conf.Gaussian
	s, err := newSelection(m, l0, sensitivity.Share{Epsilon: eps, Delta: delta}, gaussian)
	if err != nil {
		return nil, err
	}
	return &SelectionCurve{sel: s, gaussian: gaussian}, nil
}

// Optimal reports whether the release uses the optimal pre-aggregated
// selection (else it thresholds a noisy count).
func (c *SelectionCurve) Optimal() bool { return c.sel.method == selOptimal }

// Probabilities are the chances that a group of n units is released by
// thresholding and by the optimal selection.
func (c *SelectionCurve) Probabilities(n float64) (threshold, optimal float64) {
	return c.sel.thresholdProbability(c.gaussian, n), optimalKeepProbability(n, c.sel.l0, c.sel.eps, c.sel.delta)
}

// K50 are the units at which each method releases a group half the time,
// and Hard the units from which the optimal one always does.
func (c *SelectionCurve) K50() (threshold, optimal, hard float64) {
	return c.sel.k50Threshold, c.sel.k50Optimal, c.sel.hard
}
