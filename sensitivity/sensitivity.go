// Package sensitivity computes how much one privacy unit (one person) can move
// each value a query releases, and how a query's (ε, δ) is split among those
// values. It holds pure functions only: no I/O, no state, safe for concurrent
// use.
//
// The numbers follow docs/design.md. After the rewrite bounds contributions,
// a unit touches at most L0 released partitions (groups) and moves each of
// them by at most L∞. The noise layer turns (L0, L∞) into a scale: Laplace
// b = L0·L∞/ε (the L1 sensitivity over ε), Gaussian σ from the analytic
// calibration with L2 = √L0·L∞.
//
// Why the bounds hold for the rewritten SQL: per (unit, group) the rewrite
// aggregates the unit's n ≥ 1 rows and replaces "sample at most R rows" by
// its expectation, count → least(n, R) and sum s → s·least(1, R/n). A sum of
// n clamped values satisfies |s| ≤ n·max(|lower|, |upper|), so
// |s·least(1, R/n)| ≤ min(n, R)·max(|lower|, |upper|) ≤ R·max(|lower|, |upper|),
// the same bound as real sampling, with no sampling variance.
package sensitivity

import "math"

// Bound is the sensitivity of a set of released values: adding or removing
// one privacy unit changes at most L0 of them (partitions), each by at most
// LInf in absolute value.
type Bound struct {
	L0   int64
	LInf float64
}

// L1 is the L1 sensitivity L0·L∞: the worst case puts the full L∞ change in
// each of the L0 partitions. It calibrates the Laplace mechanism.
func (b Bound) L1() float64 { return float64(b.L0) * b.LInf }

// L2 is the L2 sensitivity √L0·L∞ (the Euclidean norm of L0 changes of
// size L∞). It calibrates the Gaussian mechanism, which is why Gaussian noise
// grows only with √L0 when a unit may touch many groups.
func (b Bound) L2() float64 { return math.Sqrt(float64(b.L0)) * b.LInf }

// MaxGroups returns the L0 bound of a query: how many released groups one
// unit can touch.
//
//   - Without GROUP BY (grouped == false) the query releases a single row, so
//     a unit touches exactly one group whatever max_groups_per_unit says, and
//     the result is 1. Using max_groups_per_unit there would add noise the
//     bounds do not require, wasting budget.
//   - When every group key declares public_values, publicCombinations > 0 is
//     the number of key combinations that can be released; a unit cannot
//     touch more groups than exist, so the result is
//     min(maxGroupsPerUnit, publicCombinations).
//   - Otherwise (publicCombinations <= 0) it is maxGroupsPerUnit, which the
//     rewrite enforces with its per-unit row_number() filter.
func MaxGroups(grouped bool, maxGroupsPerUnit, publicCombinations int64) int64 {
	if !grouped {
		return 1
	}
	if publicCombinations > 0 && publicCombinations < maxGroupsPerUnit {
		return publicCombinations
	}
	return maxGroupsPerUnit
}

// Count bounds COUNT(*) and COUNT(col). maxGroups is the query's L0 (see
// MaxGroups: 1 without GROUP BY, because a unit then touches the single
// output row only), maxRows is max_rows_per_unit (R). Per group a unit adds
// least(n, R) ≤ R, so L∞ = R.
func Count(maxGroups, maxRows int64) Bound {
	return Bound{L0: maxGroups, LInf: float64(maxRows)}
}

// DistinctUnits bounds COUNT(DISTINCT privacy_unit) and the per-group unit
// count used for partition selection: a unit is one unit in each group it
// touches, so L∞ = 1 over maxGroups (L0) groups.
func DistinctUnits(maxGroups int64) Bound {
	return Bound{L0: maxGroups, LInf: 1}
}

// Sum bounds SUM(col) with col clamped to [lower, upper]: per group a unit
// adds s·least(1, R/n) with |s| ≤ n·max(|lower|, |upper|), so
// L∞ = R·max(|lower|, |upper|). Adding or removing a unit moves the sum away
// from zero or towards it, so the bound is on the magnitude, not on the
// width of the range; that is what CenteredSum improves for AVG.
func Sum(maxGroups, maxRows int64, lower, upper float64) Bound {
	m := math.Max(math.Abs(lower), math.Abs(upper))
	return Bound{L0: maxGroups, LInf: float64(maxRows) * m}
}

// CenteredSum bounds the sum of (col − mid), mid = (lower+upper)/2, that AVG
// noises: avg = mid + noisy(S − mid·C) / max(noisy C, 1), clamped to
// [lower, upper]. Each clamped value is within (upper−lower)/2 of mid, so
// L∞ = R·(upper−lower)/2. For a range far from zero, e.g. [1000, 1010], that
// is 5·R instead of the 1010·R of Sum: the noise depends on the width of the
// range, not its position. Requires lower ≤ upper (conf validates it);
// lower == upper gives L∞ = 0, which the noise package refuses, and AVG is
// then the constant lower.
func CenteredSum(maxGroups, maxRows int64, lower, upper float64) Bound {
	return Bound{L0: maxGroups, LInf: float64(maxRows) * (upper - lower) / 2}
}

// Share is an (ε, δ) privacy cost.
type Share struct {
	Epsilon, Delta float64
}

// SplitWith divides one query's (eps, delta) among its aggregates and its
// partition selection, as docs/design.md specifies.
//
// By sequential composition (Dwork & Roth, Thm. 3.16) releasing mechanisms
// that are (ε_i, δ_i)-DP on the same data is (Σε_i, Σδ_i)-DP, so giving each
// of the k aggregates and the selection (s = 1 if selection, else 0) the
// share ε/(k+s) spends exactly ε. Within one aggregate the groups are
// disjoint, and the L0 in its sensitivity already accounts for a unit
// touching several groups, so the groups need no further split.
//
//   - Laplace: the aggregates are pure ε-DP and need no δ (perAgg.Delta = 0).
//     All of δ goes to the partition selection, whose threshold fails with
//     probability δ. Without selection nothing consumes δ, so the charged
//     total δ is 0.
//   - Gaussian: each of the k aggregates and the selection gets δ/(k+s);
//     the caller halves the selection's δ between its noise and threshold.
//
// An AVG counts as one aggregate; the caller halves its share between the
// count and the centred sum. perAgg is the share of each aggregate, sel the
// selection's (zero if selection is false) and total the (ε, δ) to charge,
// which is what the shares add up to. aggregates < 0 counts as 0; with no
// aggregate and no selection everything is zero.
//
// Shares are rounded down if needed so that (k+s)·share never exceeds the
// charged total, even by the rounding of one float64 division.
//
// pure of the aggregates (pure ≤ aggregates) are released by a pure ε-DP
// mechanism whatever the noise, such as the exponential mechanism of
// quantiles: with Gaussian noise δ is divided among the other aggregates
// and the selection only, so none of it is charged without being used. A
// pure aggregate's share is perAgg with Delta set to 0 by the caller.
func SplitWith(eps, delta float64, aggregates, pure int, selection bool, gaussian bool) (perAgg, sel, total Share) {
	k := max(aggregates, 0)
	pure = min(max(pure, 0), k)
	n := k
	if selection {
		n++
	}
	if n == 0 {
		return Share{}, Share{}, Share{}
	}
	epsShare := divideDown(eps, n)
	total.Epsilon = eps
	perAgg.Epsilon = epsShare
	if selection {
		sel.Epsilon = epsShare
	}
	switch {
	case gaussian && n-pure == 0:
		// nothing consumes δ: charge none
	case gaussian:
		d := divideDown(delta, n-pure)
		perAgg.Delta = d
		if selection {
			sel.Delta = d
		}
		total.Delta = delta
	case selection:
		sel.Delta = delta
		total.Delta = delta
	}
	if k == 0 {
		perAgg = Share{}
	}
	return perAgg, sel, total
}

// divideDown returns the largest float64 q ≤ x/n in exact arithmetic, so
// that n shares never add up to more than was charged. x/n rounds to
// nearest and may land one ulp above; FMA computes q·n − x with a single
// rounding, so its sign is exact.
func divideDown(x float64, n int) float64 {
	q := x / float64(n)
	for q > 0 && math.FMA(q, float64(n), -x) > 0 {
		q = math.Nextafter(q, 0)
	}
	return q
}

// CountDistinct bounds COUNT(DISTINCT col): the rewrite keeps at most
// maxDistinct of a unit's distinct non-NULL values per group (chosen by a
// salted hash of the unit and the value), and a unit can only add or
// remove values it keeps, so L∞ = maxDistinct — min(max_rows_per_unit,
// number of public values of col) — over maxGroups groups. Using R as the
// per-unit cap mirrors the row bound: a unit contributing at most R rows
// to a group could not hold more than R distinct values there.
func CountDistinct(maxGroups, maxDistinct int64) Bound {
	return Bound{L0: maxGroups, LInf: float64(maxDistinct)}
}

// CenteredSumOfSquares bounds the sum of (x−mid)² − w²/2 over clamped
// values x, w = (upper−lower)/2, that VARIANCE noises: each (x−mid)² lies in
// [0, w²], so centring it on w²/2 gives per-row magnitude ≤ w²/2 and a unit
// moves the sum by at most L∞ = R·w²/2 per group.
func CenteredSumOfSquares(maxGroups, maxRows int64, lower, upper float64) Bound {
	w := (upper - lower) / 2
	return Bound{L0: maxGroups, LInf: float64(maxRows) * w * w / 2}
}

// QuantileUtility is the sensitivity of the exponential mechanism's utility
// for the p-quantile over bucket counts: u(b) = −dist(p·N, [L_b, L_b + c_b])
// with L_b the bounded count below bucket b and N the total. A unit adds
// D ≤ R to the counts (after the rewrite's bounding), which moves L_b by a
// value in [0, D] and p·N by p·D, so u moves by at most max(p, 1−p)·R.
func QuantileUtility(maxRows int64, p float64) float64 {
	return math.Max(p, 1-p) * float64(maxRows)
}
