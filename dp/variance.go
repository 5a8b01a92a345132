package dp

import (
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// VARIANCE/STDDEV (and their _samp/_pop forms) from three noisy sums over
// values clamped to [lower, upper], centred on mid = (lower+upper)/2 with
// half-width w: the count n, S = Σ(x−mid) and Q = Σ(x−mid)² (noised as
// Q − n·w²/2, whose sensitivity is half that of Q). Then, as
// post-processing, mean = S/n ∈ [−w, w], E[(x−mid)²] = Q/n ∈ [0, w²],
// var_pop = E[(x−mid)²] − mean² ∈ [0, w²] (the largest variance of values
// in an interval of half-width w), var_samp = var_pop·n/(n−1). Centring on
// mid makes the error depend on the width of the range, not on its
// distance from zero.

func init() {
	register(rewrite.AggVariance, false, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newVariance(a, p)
	})
}

type variance struct {
	a              *rewrite.Aggregate
	count, sum, sq Part // sum and sq are centred on the middle of the bounds
	// shared is set when the count is a COUNT(x) of the same rows
	// released in the query (Aggregate.SharedCount): count is then that
	// COUNT's part, not one of this aggregate's, and countCol its column.
	shared   bool
	countCol int
}

func newVariance(a *rewrite.Aggregate, p Params) (*variance, error) {
	v := &variance{a: a, countCol: a.CountCol}
	// A third each for the count, the centred sum and the centred sum of
	// squares (sequential composition); half each for the sums when the
	// count is a released COUNT's.
	k := 3.0
	if c := a.SharedCount; c != nil {
		v.shared, v.countCol, k = true, c.CountCol, 2
		v.count = Part{sensitivity.Count(p.L0, p.MaxRows), p.Share}
	}
	share := sensitivity.Share{Epsilon: p.Share.Epsilon / k, Delta: p.Share.Delta / k}
	if !v.shared {
		v.count = Part{sensitivity.Count(p.L0, p.MaxRows), share}
	}
	v.sum = Part{sensitivity.CenteredSum(p.L0, p.MaxRows, a.Lower, a.Upper), share}
	v.sq = Part{sensitivity.CenteredSumOfSquares(p.L0, p.MaxRows, a.Lower, a.Upper), share}
	if v.countCol < 0 || a.SumCol < 0 || a.SumSqCol < 0 {
		return nil, internal("%s: the plan has no count, sum or sum of squares column", a.Func)
	}
	if err := checkParts(p.Mech, v.Parts()...); err != nil {
		return nil, err
	}
	return v, nil
}

// Parts include the sum of squares: the pre-charge check once listed the
// count and the sum by hand and forgot it (TestReleaseSpecChecksEveryNoisedPart).
func (v *variance) Parts() []Part {
	if v.shared {
		return []Part{v.sum, v.sq}
	}
	return []Part{v.count, v.sum, v.sq}
}

func (v *variance) Release(m noise.Mechanism, _ io.Reader, g *Group) (float64, error) {
	if v.shared {
		return 0, internal("%s divides by a released count", v.a.Func)
	}
	n, err := v.count.add(m, g.Vals[v.countCol])
	if err != nil {
		return 0, err
	}
	return v.releaseWith(m, g, n)
}

// releaseWith releases the variance over a noisy count n (its own, or
// the released COUNT it shares).
func (v *variance) releaseWith(m noise.Mechanism, g *Group, n float64) (float64, error) {
	a, vals := v.a, g.Vals
	w := (a.Upper - a.Lower) / 2
	c := vals[v.countCol]
	s, err := v.sum.add(m, vals[a.SumCol])
	if err != nil {
		return 0, err
	}
	q, err := v.sq.add(m, vals[a.SumSqCol]-c*w*w/2)
	if err != nil {
		return 0, err
	}
	nn := math.Max(n, 1)
	mean := math.Min(w, math.Max(-w, s/nn))
	ex2 := math.Min(w*w, math.Max(0, (q+nn*w*w/2)/nn))
	r := math.Min(w*w, math.Max(0, ex2-mean*mean))
	if a.Sample && nn >= 2 {
		r *= nn / (nn - 1)
	}
	if a.Stddev {
		r = math.Sqrt(r)
	}
	return r, nil
}

func (v *variance) Bound(name string, m noise.Mechanism) string {
	return fmt.Sprintf("%s: ±%s (95%%; n = rows in the group; from a noisy count ±%s, centred sum ±%s and sum of squares ±%s)", name,
		v.barWords(m), barText(v.count.errorBound(m)), barText(v.sum.errorBound(m)), barText(v.sq.errorBound(m)))
}

// barWords is the released value's 95% bound as a formula in n.
func (v *variance) barWords(m noise.Mechanism) string {
	num, den := v.bar(m)
	if v.a.Stddev {
		return stddevBarWords(num, den)
	}
	return fmt.Sprintf("%s/(n−%s)", barText(num), barText(den))
}

// bar is the 95% bound of the released variance as num/(n − den), for a
// group of n rows (n > den); a standard deviation's is its square root,
// as |√a − √b| ≤ √|a − b|. With the mean m1 = S/n ∈ [−w, w] and
// m2 = Q/n ∈ [0, w²] of the centred values, the released ones differ by
//
//	m2' − m2 = (eQ + en·(w²/2 − m2)) / (n + en), |w²/2 − m2| ≤ w²/2,
//	m1' − m1 = (eS − en·m1) / (n + en),          |m1| ≤ w,
//
// (clamping them to their ranges only brings them closer), so
//
//	|var' − var| ≤ |m2' − m2| + |m1' − m1|·|m1' + m1|
//	             ≤ (q2 + 2w·q1) / (n − bn),
//
// where q2 = sumBound(eQ, (w²/2)·en) and q1 = sumBound(eS, w·en), each
// at 98% (the noise of a sum with the largest coefficients is the most
// spread, as in ratioBar), and bn the count's 99% bound: all hold at
// once with probability ≥ 95%. Clamping to [0, w²] keeps the bound. The
// sample form multiplies by n'/(n'−1) instead of n/(n−1): at most the
// bound times (n−bn)/(n−bn−1) plus w²·bn/((n−bn−1)(n−1)) ≤ w²/(n−bn−1),
// which is num/(n − den) with num + w² and den = bn + 1.
func (v *variance) bar(m noise.Mechanism) (num, den float64) {
	w := (v.a.Upper - v.a.Lower) / 2
	sdN := v.count.stdDev(m)
	q2 := sumBound(m, v.sq.stdDev(m), w*w/2*sdN, 0.98)
	q1 := sumBound(m, v.sum.stdDev(m), w*sdN, 0.98)
	num, den = q2+2*w*q1, v.count.errorBoundAt(m, 0.99)
	if v.shared { // the released count is rounded: 0.5 more in en
		num, den = num+0.5*(w*w/2+2*w*w), den+0.5
	}
	if v.a.Sample {
		num, den = num+w*w, den+1
	}
	return num, den
}

func (v *variance) Explain(name string, m noise.Mechanism) []string {
	count := explainPart(name, label(v.a, "count"), m, v.count)
	if v.shared {
		count = fmt.Sprintf("Column %s (%s, count part): the released %s (the same rows), no share of its own", name, v.a.Func, v.a.SharedCount.Text)
	}
	return []string{
		count,
		explainPart(name, label(v.a, "centred sum"), m, v.sum),
		explainPart(name, label(v.a, "sum of squares"), m, v.sq),
		fmt.Sprintf("Column %s: released from the three parts, clamped to [0, %s]; 95%% error ±%s for a group of n rows",
			name, formatNum(math.Pow((v.a.Upper-v.a.Lower)/2, 2)), v.barWords(m)),
	}
}

// stddevBarWords is a standard deviation's bar, from its variance's
// D = num/(n − den): |√V' − √V| = |V' − V|/(√V' + √V) is at most √D and
// at most D/s with s = √V' the released standard deviation.
func stddevBarWords(num, den float64) string {
	return fmt.Sprintf("min(√D, D/s) with D = %s/(n−%s) and s the released value", barText(num), barText(den))
}

// stddevBar is that bar for a released s and a group of n rows.
func stddevBar(num, den, n, s float64) float64 {
	d := num / (n - den)
	if s > 0 {
		return math.Min(math.Sqrt(d), d/s)
	}
	return math.Sqrt(d)
}
