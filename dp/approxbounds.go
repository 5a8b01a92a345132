package dp

import (
	"fmt"
	"math"
	"strconv"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
)

// Clamping bounds chosen at query time for a column declared bounds: auto,
// in the manner of Google's ApproxBounds
// (github.com/google/differential-privacy, cc/docs/algorithms/approx-bounds.md):
// a histogram of the column's values over logarithmic buckets, each count
// noised, and the bounds are the outer edges of the lowest and highest
// buckets whose noisy count passes a threshold set from a success
// probability.
//
// The buckets (rewrite/autobounds.go computes them in SQL) are 2×64 + 1,
// identified by -64..64: 0 holds x = 0; j > 0 holds 0 < x ≤ 1 for j = 1
// and 2^(j−2) < x ≤ 2^(j−1) for j ≥ 2 (everything above 2^62, NaN and
// +Infinity in 64); −j the mirror image. The counts are the main query's
// own contribution-bounded rows: a unit keeps at most L0 groups, and in
// each its rows count least(1, R/n) each, so a unit's counts over all the
// buckets add up to at most L0·R. That is the histogram's L1 sensitivity:
// adding or removing one unit moves the vector by at most L0·R in L1 norm,
// however its rows spread over the buckets (one bucket may take all of
// it), so Laplace noise of scale L0·R/ε on every bucket is ε-DP (Dwork &
// Roth, Thm. 3.6). L∞·L0 per bucket with the L1 bound shared out is the
// same number; per-bucket noise of scale R/ε would not be.

// AutoBucketsPerSign is the number of buckets on each side of zero.
const AutoBucketsPerSign = 64

// AutoBuckets is the number of buckets of the histogram, -64..64.
const AutoBuckets = 2*AutoBucketsPerSign + 1

// AutoBoundsSuccess is ApproxBounds' success probability: the
// probability that no empty bucket's noisy count passes the threshold
// (so that the bounds come from data, not from noise). The threshold
// follows from it: P(Laplace(b) > t) = e^(−t/b)/2 for each of the n
// buckets, so (1 − e^(−t/b)/2)^n = p gives t = −b·ln(2·(1 − p^(1/n))).
const AutoBoundsSuccess = 1 - 1e-9

// ApproxBounds chooses one column's clamping bounds from its noisy
// histogram. It is safe for concurrent use (it holds no state beyond its
// parameters).
type ApproxBounds struct {
	Column    string
	eps       float64
	l0, rows  int64
	l1        float64 // L0·R
	threshold float64
	mech      noise.Mechanism
}

// NewApproxBounds checks the parameters of the bounds part: its ε (the
// share of the query's), L0 (groups a unit may touch) and R (rows per
// unit per group). mech must be a Laplace sampler: the histogram is
// pure ε-DP whatever the session's mechanism.
func NewApproxBounds(column string, eps float64, l0, maxRows int64, mech noise.Mechanism) (*ApproxBounds, error) {
	if mech.Name() != conf.Laplace {
		return nil, internal("approximate bounds need the Laplace sampler, got %s", mech.Name())
	}
	if l0 < 1 || maxRows < 1 {
		return nil, internal("approximate bounds: L0 %d and R %d must be at least 1", l0, maxRows)
	}
	l1 := float64(l0) * float64(maxRows)
	if _, err := mech.StdDev(1, l1, eps, 0); err != nil {
		return nil, err
	}
	return &ApproxBounds{Column: column, eps: eps, l0: l0, rows: maxRows, l1: l1,
		threshold: AutoThreshold(l1/eps, AutoBuckets, AutoBoundsSuccess), mech: mech}, nil
}

// Epsilon is the ε the bounds cost.
func (a *ApproxBounds) Epsilon() float64 { return a.eps }

// Scale is the Laplace scale of each bucket's noise, L0·R/ε.
func (a *ApproxBounds) Scale() float64 { return a.l1 / a.eps }

// Threshold is the noisy count a bucket must pass to set a bound.
func (a *ApproxBounds) Threshold() float64 { return a.threshold }

// AutoThreshold is ApproxBounds' threshold for n buckets noised with
// Laplace scale b and success probability p (see AutoBoundsSuccess).
func AutoThreshold(b float64, n int, p float64) float64 {
	// 1 − p^(1/n), computed without cancellation.
	q := -math.Expm1(math.Log1p(-(1 - p)) / float64(n))
	return -b * math.Log(2*q)
}

// AutoBucketEdges are bucket id's lower and upper edges (see the top of
// this file); id must lie in -64..64.
func AutoBucketEdges(id int) (lo, hi float64) {
	switch {
	case id == 0:
		return 0, 0
	case id > 0:
		hi = math.Ldexp(1, id-1)
		if id > 1 {
			lo = math.Ldexp(1, id-2)
		}
		return lo, hi
	default:
		lo, hi := AutoBucketEdges(-id)
		return -hi, -lo
	}
}

// ChooseAutoBounds applies ApproxBounds' rule to a noisy histogram
// (index id+64): the lower bound is the lower edge of the lowest bucket
// whose count passes the threshold, the upper bound the upper edge of the
// highest. The interval is then widened to include 0: SUM's sensitivity
// is R·max(|lower|, |upper|), so this costs it nothing and spares it the
// bias of clamping small values up (or down) to the edge of a bucket far
// from 0; AVG pays at most twice the width. found is false when no bucket
// passes: the bounds are then [0, 0], and every clamped value is 0.
func ChooseAutoBounds(noisy []float64, threshold float64) (lo, hi float64, found bool) {
	first, last := -1, -1
	for i, c := range noisy {
		if c > threshold {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return 0, 0, false
	}
	lo, _ = AutoBucketEdges(first - AutoBucketsPerSign)
	_, hi = AutoBucketEdges(last - AutoBucketsPerSign)
	return math.Min(lo, 0), math.Max(hi, 0), true
}

// AutoResult is the outcome of the bounds part: the chosen bounds, and
// whether any bucket passed the threshold.
type AutoResult struct {
	Lower, Upper float64
	Found        bool
}

// Choose noises the exact histogram (AutoBuckets counts, index id+64) and
// chooses the bounds. Only the noisy counts decide them, so the bounds,
// and anything that follows from them, are ε-DP.
func (a *ApproxBounds) Choose(hist []float64) (AutoResult, error) {
	if len(hist) != AutoBuckets {
		return AutoResult{}, internal("approximate bounds: %d buckets, want %d", len(hist), AutoBuckets)
	}
	noisy := make([]float64, len(hist))
	for i, c := range hist {
		v, err := a.mech.Add(c, 1, a.l1, a.eps, 0)
		if err != nil {
			return AutoResult{}, err
		}
		noisy[i] = v
	}
	lo, hi, found := ChooseAutoBounds(noisy, a.threshold)
	return AutoResult{Lower: lo, Upper: hi, Found: found}, nil
}

// ParseAutoHistogram reads the histogram query's rows (bucket id, count
// as text): exactly one row per bucket, -64..64 in order.
func ParseAutoHistogram(rows [][][]byte) ([]float64, error) {
	if len(rows) != AutoBuckets {
		return nil, internal("approximate bounds: the histogram has %d rows, want %d", len(rows), AutoBuckets)
	}
	out := make([]float64, AutoBuckets)
	for i, r := range rows {
		if len(r) != 2 || r[0] == nil || r[1] == nil {
			return nil, internal("approximate bounds: histogram row %d is malformed", i)
		}
		id, err := strconv.Atoi(string(r[0]))
		if err != nil || id != i-AutoBucketsPerSign {
			return nil, internal("approximate bounds: histogram row %d is not bucket %d", i, i-AutoBucketsPerSign)
		}
		c, err := strconv.ParseFloat(string(r[1]), 64)
		if err != nil || math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return nil, internal("approximate bounds: histogram row %d has no count", i)
		}
		out[i] = c
	}
	return out, nil
}

// AddCost adds the bounds part to the main query's cost: ε (basic
// composition), ρ = ε²/2 (pure ε-DP), and one Laplace release of L1
// sensitivity L0·R recorded as a single coordinate (L0 = 1), the worst
// case of an L1-bounded change for the Rényi accountant (its curve is
// superadditive in sensitivity/scale).
func (a *ApproxBounds) AddCost(c Cost) Cost {
	c.Epsilon += a.eps
	c.Rho += pureRho(a.eps)
	c.Releases = append(append([]budget.Release(nil), c.Releases...), budget.Release{
		Mechanism: budget.MechLaplace, L0: 1, Sensitivity: a.l1, Scale: a.Scale(), Epsilon: a.eps})
	return c
}

// Explain is the bounds part's lines of EXPLAIN DP.
func (a *ApproxBounds) Explain(rest float64) []string {
	return []string{
		fmt.Sprintf("Column %s: bounds: auto, chosen at query time: ε=%s (auto_bounds_share) buys a noisy histogram of its values over %d logarithmic buckets (0 and ±(2^(k−1), 2^k]), over the query's contribution-bounded rows; Laplace, L1 sensitivity L0·R = %s, scale %s",
			a.Column, formatNum(a.eps), AutoBuckets, formatNum(a.l1), formatNum(a.Scale())),
		fmt.Sprintf("Column %s: its bounds are the outer edges of the lowest and highest buckets whose noisy count passes %.1f (ApproxBounds' rule, success probability 1−1e-9), widened to include 0; the query below is answered with them and the remaining ε=%s (its sensitivities below are those of the widest bounds, ±2^63)",
			a.Column, a.threshold, formatNum(rest)),
	}
}

// Detail is the NOTICE's line on the chosen bounds (they are a DP
// release, so they may be shown).
func (a *ApproxBounds) Detail(r AutoResult) string {
	if !r.Found {
		return fmt.Sprintf("bounds of %s chosen at query time (ε=%s): no bucket passed the threshold, so its values count as 0", a.Column, formatNum(a.eps))
	}
	return fmt.Sprintf("bounds of %s chosen at query time (ε=%s): [%s, %s]", a.Column, formatNum(a.eps), formatNum(r.Lower), formatNum(r.Upper))
}
